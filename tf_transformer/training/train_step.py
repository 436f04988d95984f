"""The compiled train and eval steps: one `tf.function` each, no retracing on new lengths."""

from __future__ import annotations

import tensorflow as tf

from tf_transformer.training.losses import masked_correct_sum, masked_loss_sum

IDS_SPEC = tf.TensorSpec(shape=(None, None), dtype=tf.int64)
# ((src, tgt_in), tgt_out), as made by `tf_transformer.data.pipeline.make_batches`.
BATCH_SPEC = ((IDS_SPEC, IDS_SPEC), IDS_SPEC)
_SUM = tf.distribute.ReduceOp.SUM


class TrainStep:
    """Train and eval steps of one model and optimizer, under one `tf.distribute` strategy.

    Each step takes a batch `((src, tgt_in), tgt_out)` of int64 `(batch, length)` ids and
    returns float32 sums over the *global* batch: `{"loss_sum", "correct", "tokens"}` (summed
    token losses, tokens predicted right, real target tokens), so the caller can average over
    any number of steps. Inside a replica the loss minimised is
    `sum of the replica's token losses / global number of real tokens`; the optimizer sums
    the replicas' gradients, giving the gradient of the global token mean.

    Without distribution the steps have an `input_signature` of `(None, None)` int64 specs, so
    batches of any length share one graph. Under a multi-replica strategy they take the
    per-replica values of a distributed dataset instead and use `reduce_retracing=True`, which
    relaxes the shapes to `None` after the second length.

    Args:
      model: a built `Transformer`, created under `strategy.scope()`.
      optimizer: from `tf_transformer.training.schedule.make_optimizer`, built on the model's variables.
      label_smoothing: ε of the loss.
      strategy: the strategy (default: the current one).

    Attributes:
      train_traces, eval_traces: how many times each step was traced (for tests).
    """

    def __init__(
        self,
        model: tf.keras.Model,
        optimizer: tf.keras.optimizers.Optimizer,
        *,
        label_smoothing: float = 0.0,
        strategy: tf.distribute.Strategy | None = None,
    ):
        self.model = model
        self.optimizer = optimizer
        self.label_smoothing = float(label_smoothing)
        self.strategy = strategy or tf.distribute.get_strategy()
        self.train_traces = 0
        self.eval_traces = 0
        # No tensor-dependent Python control flow here: AutoGraph would only slow tracing.
        if self.distributed:
            options = {"reduce_retracing": True, "autograph": False}
        else:
            options = {"input_signature": [BATCH_SPEC], "autograph": False}
        self.train_step = tf.function(self._train_step, **options)
        self.eval_step = tf.function(self._eval_step, **options)

    @property
    def distributed(self) -> bool:
        return self.strategy.num_replicas_in_sync > 1

    def distribute(self, dataset: tf.data.Dataset):
        """The dataset as the steps take it (split across replicas when distributed)."""
        if not self.distributed:
            return dataset
        return self.strategy.experimental_distribute_dataset(dataset)

    def _train_step(self, batch):
        self.train_traces += 1
        sums = self.strategy.run(self._replica_train_step, args=(batch,))
        return self._reduce(sums)

    def _eval_step(self, batch):
        self.eval_traces += 1
        sums = self.strategy.run(self._replica_eval_step, args=(batch,))
        return self._reduce(sums)

    def _reduce(self, sums):
        return {key: self.strategy.reduce(_SUM, value, axis=None) for key, value in sums.items()}

    def _replica_train_step(self, batch):
        (src, tgt_in), tgt_out = batch
        context = tf.distribute.get_replica_context()
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            logits = self.model((src, tgt_in), training=True)
            loss_sum, tokens = masked_loss_sum(tgt_out, logits, self.label_smoothing)
            global_tokens = context.all_reduce(_SUM, tokens)
            loss = loss_sum / tf.maximum(global_tokens, 1.0)
            # Identity unless the optimizer is a LossScaleOptimizer (float16).
            scaled_loss = self.optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled_loss, variables)
        self.optimizer.apply_gradients(zip(gradients, variables))
        correct, _ = masked_correct_sum(tgt_out, logits)
        return {"loss_sum": loss_sum, "correct": correct, "tokens": tokens}

    def _replica_eval_step(self, batch):
        (src, tgt_in), tgt_out = batch
        logits = self.model((src, tgt_in), training=False)
        loss_sum, tokens = masked_loss_sum(tgt_out, logits, self.label_smoothing)
        correct, _ = masked_correct_sum(tgt_out, logits)
        return {"loss_sum": loss_sum, "correct": correct, "tokens": tokens}

    def evaluate(self, dataset: tf.data.Dataset) -> dict[str, float]:
        """Mean token loss and accuracy over a (non-distributed) dataset of batches."""
        totals = {"loss_sum": 0.0, "correct": 0.0, "tokens": 0.0}
        for batch in self.distribute(dataset):
            for key, value in self.eval_step(batch).items():
                totals[key] += float(value)
        tokens = max(totals["tokens"], 1.0)
        return {"loss": totals["loss_sum"] / tokens, "accuracy": totals["correct"] / tokens}
