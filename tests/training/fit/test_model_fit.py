"""Tests for `model.fit` training: compile, callbacks, .keras save/load, loss parity."""

import json

import numpy as np
import pytest
import tensorflow as tf

from tests.training.test_loop import MODEL, TRAIN, copy_task
from tf_transformer.run_dir import RunDir
from tf_transformer.training.fit.model_fit import compile_model, fit, fit_paths
from tf_transformer.training.loop import NonFiniteLossError, train
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.losses import MaskedSparseCrossEntropy
from tf_transformer.training.step.schedule import WarmupSchedule, make_optimizer
from tf_transformer.training.step.train_step import TrainStep

pytestmark = pytest.mark.cost(40)  # seconds in make test (measured)


def _weights(model) -> list[np.ndarray]:
    return [w.numpy() for w in model.weights]


def test_compiled_loss_equals_custom_loop_loss():
    config = TRAIN.replace(label_smoothing=0.1)
    model = compile_model(build_model(MODEL), config)
    batch = next(iter(copy_task(0)))
    (src, tgt_in), tgt_out = batch
    compiled = model.loss(tgt_out, model((src, tgt_in), training=False))
    sums = TrainStep(model, make_optimizer(MODEL.d_model, config), label_smoothing=0.1).eval_step(
        batch
    )
    np.testing.assert_allclose(float(compiled), float(sums["loss_sum"] / sums["tokens"]), 1e-6)


@pytest.mark.slow
def test_fit_trains_and_saves_a_loadable_keras_model(tmp_path, recwarn):
    config = TRAIN.replace(epochs=6, warmup_steps=40, max_steps=None)
    model = fit(tmp_path / "run", MODEL, config, copy_task(0), copy_task(1), verbose=0).model
    # No Keras warning that "`shuffle=True` was passed, but will be ignored" for a dataset.
    assert not [w for w in recwarn if "shuffle" in str(w.message)]
    history = model.history  # Keras' History of the last `fit`
    losses = history.history["loss"]
    assert losses[-1] < 0.8 * losses[0], losses
    assert "val_masked_accuracy" in history.history

    saved = fit_paths(tmp_path / "run")["model"]
    loaded = tf.keras.models.load_model(saved)
    assert isinstance(loaded.optimizer._learning_rate, WarmupSchedule)
    assert isinstance(loaded.loss, MaskedSparseCrossEntropy)
    assert int(loaded.optimizer.iterations.numpy()) > 0
    (src, tgt_in), _ = next(iter(copy_task(1)))
    # The checkpoint callback keeps the best epoch by val_loss: compare with the run's
    # checkpoint, which holds the final weights, only when the last epoch was the best.
    if history.history["val_loss"][-1] == min(history.history["val_loss"]):
        np.testing.assert_allclose(
            loaded((src, tgt_in)).numpy(), model((src, tgt_in)).numpy(), atol=1e-5
        )
    # The run directory reads the fitted weights like a custom-loop run.
    reloaded = RunDir(tmp_path / "run").load_model()
    np.testing.assert_allclose(
        reloaded((src, tgt_in)).numpy(), model((src, tgt_in)).numpy(), atol=1e-5
    )
    assert (tmp_path / "run" / "logs" / "fit" / "train").is_dir()


@pytest.mark.parametrize("trainer", ["loop", "fit"])
def test_a_non_finite_loss_rolls_back_to_weights_that_gave_a_finite_loss(tmp_path, trainer):
    # A real blow-up: an absurd learning rate makes the loss NaN at step 3, computed with the
    # weights of step 2 (a step's loss comes before its update), the first epoch's end, where
    # fit's backup was written. Keeping one checkpoint, the one before is kept until proven.
    config = TRAIN.replace(
        max_steps=50, lr_scale=1e6, warmup_steps=1, checkpoint_every=1, keep_checkpoints=1
    )
    run_dir = tmp_path / "run"

    def two_batches(epoch):
        return copy_task(epoch, num_examples=128)

    with pytest.raises(NonFiniteLossError, match="stopped without saving") as error:
        if trainer == "loop":
            train(run_dir, MODEL, config, two_batches, progress=False)
        else:
            fit(run_dir, MODEL, config, two_batches, verbose=0)
    (line,) = str(error.value).splitlines()
    step = int(line.split(" at step ")[1].split()[0])
    run = RunDir(run_dir)
    bad, good = (f"{run.checkpoints_path}/ckpt-{n}" for n in (step - 1, step - 2))
    assert step == 3 and run.latest_checkpoint() == good
    assert f"{bad}, whose weights gave it, was removed; the latest checkpoint is now {good}" in line
    assert not list(run.checkpoints_path.glob(f"ckpt-{step - 1}.*"))
    assert not list(run.checkpoints_path.glob(f"ckpt-{step}.*"))
    assert not fit_paths(run)["backup"].exists()  # fit's backup is not resumed from either
    # The kept weights give a finite loss on the batch whose loss was NaN.
    batch = next(iter(two_batches(1 if trainer == "loop" else 0)))  # fit repeats epoch 0's
    model = run.load_model(good)
    sums = TrainStep(model, make_optimizer(MODEL.d_model, config)).eval_step(batch)
    assert np.isfinite(float(sums["loss_sum"] / sums["tokens"]))


def _tagged_mix(root):
    """Two tagged corpora (every sentence says its corpus and number), weights 1:1."""
    from tests.data.test_mix import tagged, write_corpus
    from tf_transformer.config import DataConfig
    from tf_transformer.data.mix import Mix

    specs = [write_corpus(root / "big", tagged("big", 120)),
             write_corpus(root / "small", tagged("small", 20))]  # fmt: skip
    return Mix.load(DataConfig(dataset=specs, dataset_weights=(0.5, 0.5)))


def test_each_fit_epoch_trains_on_its_own_draw_of_the_mix(tmp_path):
    # Keras' own fit on the dataset that `fit` makes: each epoch's batches must come from
    # that epoch's draw, the one the custom loop takes for it.
    from tf_transformer.config import TrainConfig
    from tf_transformer.text.tokenizers import build_tokenizers
    from tf_transformer.training.fit.data_epoch import EpochStart
    from tf_transformer.training.start.inputs import epoch_batches

    mix = _tagged_mix(tmp_path)
    tokenizers = build_tokenizers(
        mix.sample(1000, 0), vocab_size=300, learn_params={"lower_thresh": 1}
    )
    batches = epoch_batches(mix, tokenizers, TrainConfig(token_budget=64, max_tokens=16))

    def targets(rows) -> list[tuple[int, ...]]:
        return [tuple(int(i) for i in row if i) for row in rows]

    drawn = [sorted(targets([row for _, t in batches(e) for row in t.numpy()])) for e in range(3)]
    trained: dict[int, list] = {0: [], 1: [], 2: []}
    keras_epoch = []

    class Recorder(tf.keras.Model):
        def train_step(self, data):
            _, tgt_out = data
            record = lambda rows: trained[keras_epoch[-1]].extend(targets(rows.numpy()))
            tf.py_function(record, [tgt_out], [])
            return {"loss": 0.0}

    inputs = tf.keras.Input((1,))
    model = Recorder(inputs, tf.keras.layers.Dense(1)(inputs))
    model.compile(run_eagerly=True)
    epoch = tf.Variable(0, dtype=tf.int64)
    callbacks = [EpochStart(keras_epoch.append)]
    model.fit(batches.each_pass(epoch), epochs=3, callbacks=callbacks, shuffle=False, verbose=0)
    for e in range(3):
        assert trained[e], e
        assert set(trained[e]) <= set(drawn[e])  # only that epoch's pairs
        # Keras cuts an epoch that has more batches than the first one at that count.
        assert len(trained[e]) >= 0.8 * len(drawn[e])
    assert drawn[0] != drawn[1] != drawn[2]
    assert sorted(trained[0]) == drawn[0]  # the first epoch whole


@pytest.mark.parametrize("trainer", ["loop", "fit"])
def test_mix_json_records_each_epochs_draw(tmp_path, trainer):
    from tf_transformer import cli

    mix = _tagged_mix(tmp_path)
    run_dir = tmp_path / "run"
    command = ["train", "--dataset", str(tmp_path / "big"), "--dataset", str(tmp_path / "small"),
               "--dataset-weights", "1,1", "--dev-set", str(tmp_path / "big"), "--preset", "tiny",
               "--quiet", "--vocab-size", "200", "--epochs", "3", "--token-budget", "256",
               "--run-dir", str(run_dir)]  # fmt: skip
    (tmp_path / "big" / "dev.pt").write_text("big 1 pt\n")
    (tmp_path / "big" / "dev.en").write_text("big 1 en\n")
    assert cli.main(command + (["--fit"] if trainer == "fit" else [])) == 0
    logged = json.loads((run_dir / "logs" / "mix.json").read_text())["epochs"]
    assert logged == {str(e): mix.shares(e) for e in range(3)}  # seed 0 + epoch
    assert len({tuple(counts.values()) for counts in logged.values()}) > 1
