"""The compiled train and eval steps: one `tf.function` each, no retracing on new lengths."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import tensorflow as tf

from tf_transformer.errors import InvalidValueError
from tf_transformer.text.special_tokens import PAD_ID
from tf_transformer.training.distribute import distribute_batches
from tf_transformer.training.step.losses import masked_correct_sum, masked_loss_sum

IDS_SPEC = tf.TensorSpec(shape=(None, None), dtype=tf.int64)
# ((src, tgt_in), tgt_out), as made by `tf_transformer.data.pipeline.make_batches`.
BATCH_SPEC = ((IDS_SPEC, IDS_SPEC), IDS_SPEC)
_TRAIN_STEPS = ("train_step", "accumulate_step")
_SUM = tf.distribute.ReduceOp.SUM
_SUMS = ("loss_sum", "correct", "tokens")


def real_token_logits(model: tf.keras.Model, batch, *, training: bool):
    """The model's logits at the real (non-PAD) target positions only, with their labels.

    `model((src, tgt_in))` projects every target position to the vocabulary, padding included.
    Here the decoder output is gathered at the real tokens first, so the largest matmul
    (`d_model × vocab`) and the vocabulary-wide passes of the loss and the accuracy skip the
    padding: 75% of the positions of the tutorial's padded batches of 64, ~18% of our bucketed
    ones. PAD positions add nothing to the masked loss, so the loss and its gradients are
    those of the full logits.

    Args:
      model: a `Transformer` (its `decoder_states` and `project`).
      batch: `((src, tgt_in), tgt_out)` int `(batch, length)` ids.
      training: dropout on when True.

    Returns:
      `(logits, labels)`: float32 `(1, tokens, vocab)` and `(1, tokens)`, the shapes the
      masked losses take.
    """
    inputs, tgt_out = batch
    x, _ = model.decoder_states(inputs, training=training)
    real = tf.not_equal(tgt_out, tf.cast(PAD_ID, tgt_out.dtype))
    logits = model.project(tf.boolean_mask(x, real))  # (tokens, vocab)
    return logits[tf.newaxis], tf.boolean_mask(tgt_out, real)[tf.newaxis]


def dense_gradients(gradients: list) -> list:
    """The gradients with `tf.IndexedSlices` (embedding lookups) made dense tensors.

    Keras 3's optimizers update a variable from `IndexedSlices` row by row, once per *index*:
    a token that occurs n times in a batch gets n separate Adam moment updates (`v` sums the
    squares of the n parts instead of squaring their sum, and `m` decays n times), so its
    embedding row moves up to sqrt(n) times the learning rate. A dense gradient gets Adam's
    (and the paper's) update, and the same one whether a batch is trained at once, in
    accumulated parts or across replicas (whose all-reduce would concatenate the slices).
    """
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in gradients]


class TrainStep:
    """Train and eval steps of one model and optimizer, under one `tf.distribute` strategy.

    Each step takes a batch `((src, tgt_in), tgt_out)` of int64 `(batch, length)` ids and
    returns float32 sums over the *global* batch: `{"loss_sum", "correct", "tokens"}` (summed
    token losses, tokens predicted right, real target tokens), so the caller can average over
    any number of steps. Inside a replica the loss minimised is
    `sum of the replica's token losses / global number of real tokens`; the optimizer sums
    the replicas' gradients, giving the gradient of the global token mean.

    With `accumulate_steps = N > 1`, an update takes N micro-batches per replica
    (`update`): `accumulate_step` adds each micro-batch's gradient of its summed token losses
    to per-replica sums, and `apply_step` divides them by the token count of all the
    micro-batches of all replicas and applies them once. The update is thus exactly that of
    one batch holding them all (not the mean of per-micro-batch means, which would weigh a
    short batch's tokens more), and the optimizer's step counter, which drives the
    learning-rate schedule, counts updates.

    Without distribution the steps have an `input_signature` of `(None, None)` int64 specs, so
    batches of any length share one graph. Under a multi-replica strategy they take the
    per-replica values of a distributed dataset instead: their signature is that dataset's
    `element_spec` (lengths `None`), taken from the first dataset `updates` or `distribute`
    makes, so they are traced once too (`reduce_retracing` traced the first length, then
    again relaxed: 5-15 s more per worker before its first steps under MultiWorkerMirrored).

    Args:
      model: a built `Transformer`, created under `strategy.scope()`.
      optimizer: from `tf_transformer.training.step.schedule.make_optimizer`, built on the model's
        variables.
      label_smoothing: ε of the loss.
      strategy: the strategy (default: the current one).
      accumulate_steps: micro-batches per replica and update.

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
        accumulate_steps: int = 1,
    ):
        if accumulate_steps < 1:
            raise InvalidValueError(f"accumulate_steps must be positive, got {accumulate_steps}.")
        self.model = model
        self.optimizer = optimizer
        self.label_smoothing = float(label_smoothing)
        self.strategy = strategy or tf.distribute.get_strategy()
        self.accumulate_steps = int(accumulate_steps)
        self.train_traces = 0
        self.eval_traces = 0
        if self.accumulate_steps > 1:
            self._make_accumulators()
            self.apply_step = tf.function(self._apply_step, autograph=False)
        # Distributed batches have the spec of the distributed dataset (per-replica values):
        # `updates` and `distribute` take it from their first dataset, so that each step is
        # traced once for all batch shapes (not for the first shape, then again relaxed).
        if not self.distributed:
            self._make_steps((*_TRAIN_STEPS, "eval_step"), BATCH_SPEC)

    def _make_steps(self, names: tuple[str, ...], spec) -> None:
        # No tensor-dependent Python control flow here: AutoGraph would only slow tracing.
        # (`accumulate_step` is made but never traced when accumulate_steps is 1.)
        for name in names:
            function = getattr(self, f"_{name}")
            setattr(self, name, tf.function(function, input_signature=[spec], autograph=False))

    def _distributed(self, dataset: tf.data.Dataset, names: tuple[str, ...], group_size=None):
        distributed = distribute_batches(self.strategy, dataset, group_size)
        if self.distributed and not hasattr(self, names[0]):
            self._make_steps(names, distributed.element_spec)
        return distributed

    @property
    def distributed(self) -> bool:
        return self.strategy.num_replicas_in_sync > 1

    @property
    def group_size(self) -> int:
        """Batches of the epoch's sequence that one update trains on."""
        return self.strategy.num_replicas_in_sync * self.accumulate_steps

    # Input.

    def updates(self, dataset) -> Iterator[list]:
        """The dataset as lists of `accumulate_steps` (distributed) micro-batches, one per update.

        Each update covers the next `group_size` batches of `dataset`, each replica training
        its own whole batches (see `tf_transformer.training.distribute`); `dataset` may be a
        function `Shard -> batches`, each worker's own (`TrainConfig.shard_data`).
        """
        iterator = iter(self._distributed(dataset, _TRAIN_STEPS, self.group_size))
        while True:
            micro_batches = list(itertools.islice(iterator, self.accumulate_steps))
            if len(micro_batches) < self.accumulate_steps:
                return
            yield micro_batches

    def distribute(self, dataset: tf.data.Dataset):
        """The dataset as the steps take it, one batch per replica and step."""
        return self._distributed(dataset, ("eval_step",))

    # Steps.

    def update(self, micro_batches: list) -> dict[str, tf.Tensor]:
        """One optimizer update on `accumulate_steps` micro-batches (from `updates`)."""
        if self.accumulate_steps == 1:
            return self.train_step(micro_batches[0])
        for batch in micro_batches:
            self.accumulate_step(batch)
        return self.apply_step()

    def _train_step(self, batch):
        self.train_traces += 1
        sums = self.strategy.run(self._replica_train_step, args=(batch,))
        return self._reduce(sums)

    def _eval_step(self, batch):
        self.eval_traces += 1
        sums = self.strategy.run(self._replica_eval_step, args=(batch,))
        return self._reduce(sums)

    def _accumulate_step(self, batch):
        self.train_traces += 1
        self.strategy.run(self._replica_accumulate_step, args=(batch,))

    def _apply_step(self):
        return self._reduce(self.strategy.run(self._replica_apply_step))

    def _logits(self, batch, *, training: bool):
        """`real_token_logits` of a replica's batch. Distributed, a worker whose own batches
        have run out (`TrainConfig.shard_data`) gets tf.distribute's stand-ins, `(0, 0)` each,
        widened here to the one column of `distribute.empty_batch` (the model takes sequences
        of one position at least); without distribution the step traces no such op."""
        if self.distributed:
            batch = tf.nest.map_structure(
                lambda ids: tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]]), batch
            )
        return real_token_logits(self.model, batch, training=training)

    def _reduce(self, sums):
        return {key: self.strategy.reduce(_SUM, value, axis=None) for key, value in sums.items()}

    def _global_tokens(self, tokens):
        if not self.distributed:
            return tokens
        return tf.distribute.get_replica_context().all_reduce(_SUM, tokens)

    def _replica_train_step(self, batch):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            logits, labels = self._logits(batch, training=True)
            loss_sum, tokens = masked_loss_sum(labels, logits, self.label_smoothing)
            loss = loss_sum / tf.maximum(self._global_tokens(tokens), 1.0)
            # Identity unless the optimizer is a LossScaleOptimizer (float16).
            scaled_loss = self.optimizer.scale_loss(loss)
        gradients = dense_gradients(tape.gradient(scaled_loss, variables))
        self.optimizer.apply_gradients(zip(gradients, variables))
        correct, _ = masked_correct_sum(labels, logits)
        return {"loss_sum": loss_sum, "correct": correct, "tokens": tokens}

    def _replica_eval_step(self, batch):
        logits, labels = self._logits(batch, training=False)
        loss_sum, tokens = masked_loss_sum(labels, logits, self.label_smoothing)
        correct, _ = masked_correct_sum(labels, logits)
        return {"loss_sum": loss_sum, "correct": correct, "tokens": tokens}

    # Gradient accumulation.

    def _make_accumulators(self) -> None:
        # Per-replica sums (ON_READ: each replica adds to its own copy, no communication until
        # `apply_step`), not saved in checkpoints: an update never spans a checkpoint.
        def local_sum(shape, name):
            return tf.Variable(
                tf.zeros(shape, tf.float32),
                trainable=False,
                name=name,
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.SUM,
            )

        with self.strategy.scope():
            self._gradient_sums = [
                local_sum(variable.shape, "gradient_sum")
                for variable in self.model.trainable_variables
            ]
            self._metric_sums = {key: local_sum((), key) for key in _SUMS}

    def _replica_accumulate_step(self, batch):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            logits, labels = self._logits(batch, training=True)
            loss_sum, tokens = masked_loss_sum(labels, logits, self.label_smoothing)
            # Differentiate the micro-batch's token mean (the magnitudes of an ordinary step,
            # which float16 loss scaling expects) and weigh it by its tokens below: the sums
            # are those of the summed token losses.
            loss = loss_sum / tf.maximum(tokens, 1.0)
            scaled_loss = self.optimizer.scale_loss(loss)
        gradients = dense_gradients(tape.gradient(scaled_loss, variables))
        for total, gradient in zip(self._gradient_sums, gradients):
            if gradient is not None:
                total.assign_add(gradient * tokens)
        correct, _ = masked_correct_sum(labels, logits)
        for key, value in zip(_SUMS, (loss_sum, correct, tokens)):
            self._metric_sums[key].assign_add(value)

    def _replica_apply_step(self):
        variables = self.model.trainable_variables
        sums = {key: total.read_value() for key, total in self._metric_sums.items()}
        scale = 1.0 / tf.maximum(self._global_tokens(sums["tokens"]), 1.0)
        gradients = [total.read_value() * scale for total in self._gradient_sums]
        self.optimizer.apply_gradients(zip(gradients, variables))
        for total in [*self._gradient_sums, *self._metric_sums.values()]:
            total.assign(tf.zeros_like(total))
        return sums

    def evaluate(self, dataset: tf.data.Dataset) -> dict[str, float]:
        """Mean token loss and accuracy over a dataset of batches (split among replicas)."""
        totals = {"loss_sum": 0.0, "correct": 0.0, "tokens": 0.0}
        for batch in self.distribute(dataset):
            for key, value in self.eval_step(batch).items():
                totals[key] += float(value)
        tokens = max(totals["tokens"], 1.0)
        return {"loss": totals["loss_sum"] / tokens, "accuracy": totals["correct"] / tokens}
