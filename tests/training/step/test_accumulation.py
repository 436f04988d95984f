"""Tests for gradient accumulation: the custom loop's update is that of one batch holding all the
micro-batches; `fit`'s is Keras' mean of the micro-batches' token means; both count updates."""

import numpy as np
import pytest
import tensorflow as tf

from tests.training.test_loop import MODEL, TRAIN, copy_task
from tf_transformer.run_dir import RunDir
from tf_transformer.training.checkpoints import TrainState, make_checkpoint_manager
from tf_transformer.training.fit.model_fit import fit
from tf_transformer.training.fit.optimizer import UpdateSchedule, fit_optimizer
from tf_transformer.training.loop import train
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.losses import masked_loss_sum
from tf_transformer.training.step.schedule import WarmupSchedule, make_optimizer
from tf_transformer.training.step.train_step import TrainStep

pytestmark = pytest.mark.cost(40)  # seconds in make test (measured)

# Adam's first update is `lr * sqrt(1 - beta_2) * g / (sqrt(1 - beta_2) |g| + epsilon)`: with a
# huge epsilon (and a learning rate as huge) it is linear in the gradient `g`, so updates
# compare like gradients.
LINEAR_TRAIN = TRAIN.replace(lr_scale=1e11, epsilon=1e9, warmup_steps=100)


def _linear_rate(config=LINEAR_TRAIN) -> float:
    rate = float(WarmupSchedule(MODEL.d_model, config.warmup_steps, config.lr_scale)(0))
    return rate * np.sqrt(1.0 - config.beta_2) / config.epsilon


def micro_batches() -> list:
    """Three batches of different sizes, lengths and token counts (87, 41 and 10 tokens)."""
    batches = list(copy_task(0, batch_size=16).take(3))
    cuts = [(16, 8), (8, 6), (3, 5)]
    batches = [
        tf.nest.map_structure(lambda t, rows=rows, length=length: t[:rows, :length], batch)
        for batch, (rows, length) in zip(batches, cuts)
    ]
    tokens = [int(np.count_nonzero(b[1].numpy())) for b in batches]
    assert len(set(tokens)) == 3, tokens
    return batches


def union(batches) -> tuple:
    """One batch holding every row of `batches`, padded to the longest."""
    length = max(b[1].shape[1] for b in batches)

    def stack(tensors):
        return tf.concat([tf.pad(t, [[0, 0], [0, length - t.shape[1]]]) for t in tensors], 0)

    return ((stack([b[0][0] for b in batches]), stack([b[0][1] for b in batches])),) + (
        stack([b[1] for b in batches]),
    )


def _fresh_model():
    tf.keras.utils.set_random_seed(0)
    return build_model(MODEL)


def _gradient(model, loss_fn) -> list[np.ndarray]:
    with tf.GradientTape() as tape:
        loss = loss_fn()
    return [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, model.trainable_variables)]


def _token_mean(model, batch):
    (src, tgt_in), tgt_out = batch
    loss_sum, tokens = masked_loss_sum(tgt_out, model((src, tgt_in), training=True))
    return loss_sum / tokens


def _expected_updates(batches):
    """`(union, mean_of_means)`: the two candidate gradients of an accumulated update."""
    model = _fresh_model()
    of_union = _gradient(model, lambda: _token_mean(model, union(batches)))
    per_batch = [_gradient(model, lambda b=b: _token_mean(model, b)) for b in batches]
    mean_of_means = [np.mean(parts, axis=0) for parts in zip(*per_batch)]
    return of_union, mean_of_means


def _applied_gradient(before, model) -> list[np.ndarray]:
    """The gradient a linear-Adam update applied (see LINEAR_TRAIN)."""
    rate = _linear_rate()
    return [(b - v.numpy()) / rate for b, v in zip(before, model.trainable_variables)]


def _assert_gradients_close(actual, expected, tolerance):
    scale = max(float(np.max(np.abs(g))) for g in expected)
    worst = max(float(np.max(np.abs(a - e))) for a, e in zip(actual, expected))
    assert worst <= tolerance * scale, (worst, scale)


def _steps(accumulate_steps, optimizer=None):
    model = _fresh_model()
    optimizer = optimizer or make_optimizer(MODEL.d_model, LINEAR_TRAIN)
    optimizer.build(model.trainable_variables)
    return TrainStep(model, optimizer, accumulate_steps=accumulate_steps)


def test_accumulated_micro_batches_update_like_their_union():
    batches = micro_batches()
    of_union, mean_of_means = _expected_updates(batches)
    # The weighting matters at these token counts: the two candidates differ.
    gap = max(float(np.max(np.abs(u - m))) for u, m in zip(of_union, mean_of_means))
    assert gap > 1e-2 * max(float(np.max(np.abs(u))) for u in of_union)

    accumulated = _steps(3)
    before = [v.numpy() for v in accumulated.model.trainable_variables]
    sums = accumulated.update(batches)
    _assert_gradients_close(_applied_gradient(before, accumulated.model), of_union, 1e-4)
    # The sums are those of all the micro-batches, and one optimizer step was taken.
    assert float(sums["tokens"]) == sum(np.count_nonzero(b[1].numpy()) for b in batches)
    assert int(accumulated.optimizer.iterations) == 1

    # The same as one step on the union batch, within float error (SGD: the gradient itself).
    sgd = {k: _steps(k, tf.keras.optimizers.SGD(1.0)) for k in (1, 3)}
    sgd[1].train_step(union(batches))
    sgd[3].update(batches)
    for a, b in zip(sgd[1].model.trainable_variables, sgd[3].model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_accumulators_are_reset_after_each_update():
    batches = micro_batches()
    steps = _steps(2, tf.keras.optimizers.SGD(1.0))
    reference = _steps(1, tf.keras.optimizers.SGD(1.0))
    for pair in (batches[:2], [batches[2], batches[0]]):
        steps.update(pair)
        reference.train_step(union(pair))
    for a, b in zip(steps.model.trainable_variables, reference.model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert int(steps.optimizer.iterations) == 2


@pytest.mark.slow
def test_loop_counts_updates_and_resumes_at_the_right_batch(tmp_path):
    # 8 batches an epoch, 3 per update: updates of 3, 3 and 2 (+ an empty) batches.
    config = TRAIN.replace(accumulate_steps=3, max_steps=5, epochs=None, checkpoint_every=1)
    steps_seen = []
    result = train(
        tmp_path / "full",
        MODEL,
        config,
        copy_task,
        progress=False,
        on_step=lambda step, metrics: steps_seen.append((step, metrics["tokens"])),
    )
    assert result.step == 5 and result.epoch == 1
    # Each update's tokens are those of its group of batches of the epoch's sequence.
    first, second = ([int(np.count_nonzero(b[1].numpy())) for b in copy_task(e)] for e in (0, 1))
    groups = [sum(first[0:3]), sum(first[3:6]), sum(first[6:8])]
    groups += [sum(second[0:3]), sum(second[3:6])]
    assert steps_seen == list(zip(range(1, 6), groups))

    # The checkpoint of step 4 (epoch 1, its first update) resumes at batch 3 of epoch 1.
    run = RunDir(tmp_path / "full")
    model = build_model(MODEL)
    state = TrainState()
    optimizer = make_optimizer(MODEL.d_model, config)
    optimizer.build(model.trainable_variables)
    checkpoint = make_checkpoint_manager(
        tmp_path / "unused", model=model, optimizer=optimizer, state=state
    ).checkpoint
    checkpoint.restore(f"{run.checkpoints_path}/ckpt-4").expect_partial()
    assert (int(state.step), int(state.epoch), int(state.position)) == (4, 1, 3)
    # The optimizer counted updates, and the schedule saw them (not 10 micro-batches).
    assert int(optimizer.iterations) == 4
    schedule = WarmupSchedule(MODEL.d_model, config.warmup_steps)
    assert float(optimizer.learning_rate) == pytest.approx(float(schedule(4)))

    # Interrupted at step 2 and resumed: the weights of the uninterrupted run.
    train(tmp_path / "resumed", MODEL, config.replace(max_steps=2), copy_task, progress=False)
    resumed = train(tmp_path / "resumed", MODEL, config, copy_task, progress=False)
    for a, b in zip(result.model.weights, resumed.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.slow
def test_fit_accumulation_averages_token_means_and_counts_updates(tmp_path, recwarn):
    batches = micro_batches()[:2]
    of_union, mean_of_means = _expected_updates(batches)
    data = tf.data.Dataset.from_generator(
        lambda: iter(batches),
        output_signature=(
            (tf.TensorSpec((None, None), tf.int64),) * 2,
            tf.TensorSpec((None, None), tf.int64),
        ),
    )
    config = LINEAR_TRAIN.replace(accumulate_steps=2, epochs=1, max_steps=None)
    model = fit(tmp_path / "run", MODEL, config, data, verbose=0).model
    # A dataset of unknown length ends the epoch: not an interruption (no Keras warning).
    assert not [w for w in recwarn if "ran out of data" in str(w.message)]
    before = [v.numpy() for v in _fresh_model().trainable_variables]
    applied = _applied_gradient(before, model)
    # Keras averages the two batches' token means: not the union's token mean.
    _assert_gradients_close(applied, mean_of_means, 1e-4)
    gap = max(float(np.max(np.abs(a - u))) for a, u in zip(applied, of_union))
    assert gap > 1e-2 * max(float(np.max(np.abs(u))) for u in of_union)
    # Two micro-batches, one update: the counter and the checkpoint's step count updates.
    assert int(model.optimizer.iterations) == 1 and int(model.optimizer._iterations) == 2
    assert RunDir(tmp_path / "run").latest_checkpoint().endswith("ckpt-1")


def test_fit_schedule_counts_updates():
    optimizer = fit_optimizer(MODEL.d_model, TRAIN.replace(accumulate_steps=4))
    schedule = optimizer._learning_rate
    assert isinstance(schedule, UpdateSchedule) and optimizer.gradient_accumulation_steps == 4
    inner = WarmupSchedule(MODEL.d_model, TRAIN.warmup_steps)
    for micro_batch in (0, 3, 4, 7, 41):
        assert float(schedule(micro_batch)) == float(inner(micro_batch // 4))
    restored = UpdateSchedule.from_config(schedule.get_config())
    assert float(restored(41)) == float(schedule(41))
    assert fit_optimizer(MODEL.d_model, TRAIN).gradient_accumulation_steps is None


def test_accumulate_steps_flag_sets_accumulate_steps():
    from tf_transformer.cli import build_parser
    from tf_transformer.commands.train import configs_from_args

    args = build_parser().parse_args(["train", "--preset", "tiny", "--accumulate-steps", "4"])
    assert configs_from_args(args)[1].accumulate_steps == 4
    args = build_parser().parse_args(["train", "--preset", "tiny"])
    assert configs_from_args(args)[1].accumulate_steps == 1
    with pytest.raises(ValueError, match="accumulate_steps must be positive"):
        TRAIN.replace(accumulate_steps=0)


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_accumulation_under_mixed_precision(precision):
    model = build_model(MODEL, precision)
    optimizer = make_optimizer(MODEL.d_model, TRAIN.replace(mixed_precision=precision))
    optimizer.build(model.trainable_variables)
    steps = TrainStep(model, optimizer, accumulate_steps=2)
    before = [v.numpy().copy() for v in model.trainable_variables]
    batches = micro_batches()
    for pair in (batches[:2], batches[1:]):
        sums = steps.update(pair)
        assert np.isfinite(float(sums["loss_sum"])) and float(sums["tokens"]) > 0
    assert int(optimizer.iterations) == 2
    after = [v.numpy() for v in model.trainable_variables]
    assert all(np.isfinite(a).all() for a in after)
    # float16 may skip a step while the loss scale settles; bfloat16 always updates.
    if precision == "bfloat16":
        assert not np.array_equal(before[1], after[1])
