"""Validation while training: dev BLEU in TensorBoard, the best checkpoint, patience, and the
checkpoint that translate/evaluate/export read (best, else averaged, else latest)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

from tests.inference.test_translator import tiny_model, tiny_tokenizers
from tests.training.test_logs import read_scalars
from tests.training.test_loop import MODEL, TRAIN, copy_task
from tf_transformer import cli, training
from tf_transformer.config import (
    DataConfig,
    DecodeConfig,
    TrainConfig,
    get_preset,
    get_train_preset,
)
from tf_transformer.inference.evaluate import Scores, evaluate
from tf_transformer.inference.translator import Translator
from tf_transformer.run_dir import RunDir
from tf_transformer.training.best_checkpoint import BestCheckpoint, Evaluation
from tf_transformer.training.fit.model_fit import fit
from tf_transformer.training.loop import train
from tf_transformer.training.policies import budget
from tf_transformer.training.step.build import build_model
from tf_transformer.training.validation import Validator
from tf_transformer.weights import model_checkpoint

pytestmark = pytest.mark.cost(70)  # seconds in make test (measured)

EVAL_SENTENCES = 20


def _weights(model) -> list[np.ndarray]:
    return [w.numpy() for w in model.weights]


def _assert_same_weights(a, b) -> None:
    for x, y in zip(_weights(a), _weights(b), strict=True):
        np.testing.assert_array_equal(x, y)


def read_texts(log_dir) -> dict[str, list[tuple[int, np.ndarray]]]:
    """`{tag: [(step, string array), ...]}` of the text plugin, as TensorBoard loads the folder."""
    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {
        tag: [(e.step, tf.make_ndarray(e.tensor_proto)) for e in events.Tensors(tag)]
        for tag in events.Tags()["tensors"]
        if events.SummaryMetadata(tag).plugin_data.plugin_name == "text"
    }


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    """A tiny run on the sample corpus: 6 steps, dev BLEU on 20 sentences at steps 3 and 6."""
    root = tmp_path_factory.mktemp("validation") / "run"
    data = DataConfig("sample")
    config = get_train_preset("tiny").replace(
        epochs=None, max_steps=6, eval_every=3, eval_sentences=EVAL_SENTENCES, vocab_size=500
    )
    result = training.run(
        root,
        data,
        get_preset("tiny"),
        config,
        train_pairs=data.load("train").take(500),
        progress=False,
    )
    dev = [(s.decode(), t.decode()) for s, t in data.load("validation").as_numpy_iterator()]
    return RunDir(root), result, dev[:EVAL_SENTENCES]


@pytest.mark.slow
def test_dev_bleu_and_samples_go_to_tensorboard(sample_run):
    run, result, dev = sample_run
    assert [e["step"] for e in result.evaluations] == [3, 6]
    scalars = read_scalars(run.logs_path / "validation")
    for name in ("bleu", "bleu_lc", "chrf"):
        assert scalars[name] == [(e["step"], pytest.approx(e[name])) for e in result.evaluations]
    seconds = [value for _, value in scalars["eval_seconds"]]
    assert seconds == pytest.approx([e["seconds"] for e in result.evaluations])
    assert result.eval_seconds == pytest.approx(sum(seconds)) and result.eval_seconds > 0
    (samples,) = read_texts(run.logs_path / "validation").values()
    assert [step for step, _ in samples] == [3, 6]
    table = samples[-1][1]
    assert table.shape == (4, 3)
    assert [cell.decode() for cell in table[0]] == ["source", "reference", "hypothesis"]
    assert [tuple(cell.decode() for cell in row[:2]) for row in table[1:]] == dev[:3]


@pytest.mark.slow
def test_best_checkpoint_holds_the_best_weights_and_their_real_scores(sample_run):
    run, result, dev = sample_run
    record = run.best_record()
    evaluations = result.evaluations
    best = max(evaluations, key=lambda e: (e["bleu"], e["chrf"]))  # a tie keeps the first
    assert record["step"] == best["step"]
    assert record["bleu"] == pytest.approx(best["bleu"])
    assert result.best_checkpoint == run.latest_checkpoint("best")
    assert result.best_checkpoint.endswith(f"best/ckpt-{best['step']}")
    model = run.load_model("best")
    _assert_same_weights(model, run.load_model(f"{run.checkpoints_path}/ckpt-{best['step']}"))
    # The recorded scores are the real translator's and sacreBLEU's on the dev subset.
    cap = min(run.train_config().max_tokens, model.config.max_length)
    translator = Translator(
        run.load_tokenizers(),
        model,
        config=DecodeConfig(beam_size=1, max_source_tokens=cap, max_new_tokens=cap),
    )
    scores, hypotheses = evaluate(translator.translate_batch, dev, progress=False)
    assert scores.num_sentences == record["num_sentences"] == EVAL_SENTENCES
    assert (scores.bleu, scores.chrf) == pytest.approx((record["bleu"], record["chrf"]))
    (samples,) = read_texts(run.logs_path / "validation").values()
    table = dict(samples)[best["step"]]
    assert [row[2].decode() for row in table[1:]] == hypotheses[:3]


def test_evaluation_line():
    evaluation = Evaluation(
        step=500,
        bleu=21.43,
        bleu_lc=30.0,
        chrf=45.12,
        seconds=12.34,
        best_step=500,
        best_bleu=21.43,
    )
    assert evaluation.line() == "eval 12.3 s at step 500: BLEU 21.4 chrF 45.1 (best so far)"
    later = dataclasses.replace(
        evaluation, step=1500, bleu=20.0, chrf=44.0, seconds=11.0, since_best=2, stop=True
    )
    assert later.line() == (
        "eval 11.0 s at step 1500: BLEU 20.0 chrF 44.0 "
        "(best 21.4 at step 500; stopping: no better BLEU in 2 evaluations)"
    )


# The selection logic on scripted scores: a Validator whose scoring is stubbed.


def _scores(bleu: float, chrf: float) -> Scores:
    return Scores(bleu, bleu, chrf, "bleu", "bleu_lc", "chrf", num_sentences=1, ted_style=False)


class ScriptedValidator(Validator):
    """A Validator that returns scripted `(bleu, chrf)` values instead of translating."""

    def __init__(self, run_dir, values, *, patience=None, on_score=None):
        best = BestCheckpoint(RunDir(run_dir), patience=patience)
        super().__init__([("um gato .", "a cat .")], tokenizers=None, best=best)
        self.values = iter(values)
        self.on_score = on_score

    def score(self, model):
        if self.on_score is not None:
            self.on_score()
        return _scores(*next(self.values)), ["the cat ."]


def _train(run_dir, validator, **changes):
    config = TRAIN.replace(checkpoint_every=100, keep_checkpoints=10, **changes)
    return train(run_dir, MODEL, config, copy_task, progress=False, validate=validator)


def _fit(run_dir, validator, **changes):
    config = TRAIN.replace(checkpoint_every=100, keep_checkpoints=10, **changes)
    return fit(run_dir, MODEL, config, copy_task, validate=validator, verbose=0)


def test_best_checkpoint_keeps_the_best_step(tmp_path):
    # BLEU ties at step 8 with a lower chrF: step 4 stays the best.
    values = [(1.0, 10.0), (5.0, 20.0), (3.0, 30.0), (5.0, 15.0)]
    result = _train(tmp_path, ScriptedValidator(tmp_path, values), max_steps=8, eval_every=2)
    run = RunDir(tmp_path)
    assert result.stopped_by == "max_steps"
    assert [e["step"] for e in result.evaluations] == [2, 4, 6, 8]
    assert run.best_record() == {
        "step": 4,
        "bleu": 5.0,
        "bleu_lc": 5.0,
        "chrf": 20.0,
        "num_sentences": 1,
        "checkpoint": "ckpt-4",
        "evaluations_since": 2,
    }
    assert result.best_checkpoint == str(run.best_path / "ckpt-4")
    # The best it replaced stays until the next replacement (a reader may be reading it).
    assert sorted(p.name for p in run.best_path.glob("*.index")) == ["ckpt-2.index", "ckpt-4.index"]
    _assert_same_weights(run.load_model("best"), run.load_model(f"{run.checkpoints_path}/ckpt-4"))
    assert not np.array_equal(_weights(run.load_model("best"))[0], _weights(result.model)[0])


def test_fit_validates_every_n_steps_keeps_the_best_and_stops_on_patience(tmp_path):
    # The custom loop's policies under model.fit: evaluations at steps 2, 4, 6, 8; step 4's
    # weights kept as the best; patience 2 stops at step 8; the average (last value) loses.
    values = [(5.0, 50.0), (6.0, 60.0), (4.0, 40.0), (6.0, 59.0), (3.0, 30.0)]
    validator = ScriptedValidator(tmp_path, values, patience=2)
    result = _fit(tmp_path, validator, max_steps=100, eval_every=2, average_last=2)
    run = RunDir(tmp_path)
    assert result.stopped_by == "patience" and result.step == 8
    assert [e["step"] for e in result.evaluations] == [2, 4, 6, 8]
    assert result.evaluations[-1]["stop"] and result.checkpoint.endswith("ckpt-8")
    assert [step for step, _ in read_scalars(run.logs_path / "validation")["bleu"]] == [2, 4, 6, 8]
    record = run.best_record()
    assert (record["step"], record["evaluations_since"], "source" in record) == (4, 2, False)
    assert result.best_checkpoint == str(run.best_path / "ckpt-4")
    _assert_same_weights(run.load_model("best"), run.load_model(f"{run.checkpoints_path}/ckpt-4"))
    assert not np.array_equal(_weights(run.load_model("best"))[0], _weights(result.model)[0])
    assert result.averaged_checkpoint == run.latest_checkpoint("averaged")
    assert next(validator.values, None) is None  # the average was scored


def test_equal_bleu_is_broken_by_chrf(tmp_path):
    best = BestCheckpoint(RunDir(tmp_path))
    assert best.is_better(_scores(0.0, 1.0))  # the first evaluation is the best so far
    best.record = {"bleu": 5.0, "chrf": 20.0}
    assert best.is_better(_scores(5.0, 20.5)) and best.is_better(_scores(5.5, 0.0))
    assert not best.is_better(_scores(5.0, 20.0)) and not best.is_better(_scores(4.9, 99.0))


def test_patience_stops_the_run_and_still_averages(tmp_path):
    # The last value scores the averaged checkpoint, which loses to step 2.
    values = [(5.0, 50.0), (4.0, 60.0), (4.5, 40.0), (1.0, 10.0), (99.0, 99.0)]
    validator = ScriptedValidator(tmp_path, values, patience=2)
    result = _train(tmp_path, validator, max_steps=100, eval_every=2, average_last=2)
    assert result.stopped_by == "patience"
    assert result.step == 6 and result.evaluations[-1]["stop"]
    assert result.checkpoint.endswith("ckpt-6")
    record = RunDir(tmp_path).best_record()
    assert record["step"] == 2 and "source" not in record
    assert record["evaluations_since"] == 2  # the average's evaluation does not count
    assert result.averaged_checkpoint is not None
    assert next(validator.values) == (99.0, 99.0)  # scored once, not again


def test_the_averaged_checkpoint_becomes_the_best_when_it_scores_higher(tmp_path):
    values = [(5.0, 50.0), (6.0, 60.0), (7.0, 70.0)]
    validator = ScriptedValidator(tmp_path, values)
    result = _train(tmp_path, validator, max_steps=4, eval_every=2, average_last=2)
    run = RunDir(tmp_path)
    record = run.best_record()
    assert record["source"] == "averaged last 2" and record["step"] == 4
    assert record["bleu"] == 7.0 and record["evaluations_since"] == 0
    assert result.best_checkpoint == run.latest_checkpoint("best")
    _assert_same_weights(run.load_model("best"), run.load_model(result.averaged_checkpoint))
    assert result.eval_seconds > 0
    scalars = read_scalars(run.logs_path / "validation")
    assert scalars["bleu_averaged"] == [(4, 7.0)]
    assert [step for step, _ in scalars["bleu"]] == [2, 4]  # the loop's own evaluations


def test_resume_keeps_the_best_record_and_the_patience_count(tmp_path):
    first = ScriptedValidator(tmp_path, [(9.0, 90.0), (1.0, 10.0)], patience=3)
    _train(tmp_path, first, max_steps=4, eval_every=2)
    run = RunDir(tmp_path)
    best_weights = _weights(run.load_model("best"))
    assert run.best_record()["evaluations_since"] == 1

    resumed = ScriptedValidator(tmp_path, [(2.0, 20.0), (3.0, 30.0), (4.0, 40.0)], patience=3)
    result = _train(tmp_path, resumed, max_steps=100, eval_every=2)
    # Two more evaluations without a better BLEU make three since step 2's.
    assert result.stopped_by == "patience" and result.step == 8
    record = run.best_record()
    assert (record["step"], record["bleu"], record["evaluations_since"]) == (2, 9.0, 3)
    for a, b in zip(best_weights, _weights(run.load_model("best")), strict=True):
        np.testing.assert_array_equal(a, b)


def test_evaluation_time_counts_in_the_budget(tmp_path, monkeypatch):
    clock = {"offset": 0.0}
    monotonic = budget.time.monotonic  # the clock of the time budget
    monkeypatch.setattr(budget.time, "monotonic", lambda: monotonic() + clock["offset"])

    def slow_evaluation():  # an evaluation that takes an hour
        clock["offset"] += 3600.0

    validator = ScriptedValidator(tmp_path, [(1.0, 1.0)], on_score=slow_evaluation)
    result = _train(tmp_path, validator, max_steps=100, max_minutes=30, eval_every=2)
    assert result.stopped_by == "max_minutes" and result.step == 2
    assert len(result.evaluations) == 1


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"eval_every": 0}, "eval_every"),
        ({"patience": 2}, "eval_every"),
        ({"eval_every": 5, "patience": 0}, "patience"),
        ({"eval_sentences": 0}, "eval_sentences"),
    ],
)
def test_bad_validation_settings_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes)


def test_train_flags_set_the_validation_fields():
    args = cli.build_parser().parse_args(
        ["train", "--preset", "tiny", "--eval-every", "7", "--patience", "2"]
        + ["--eval-sentences", "50"]
    )
    from tf_transformer.commands.train import configs_from_args

    _, config = configs_from_args(args)
    assert (config.eval_every, config.patience, config.eval_sentences) == (7, 2, 50)


# Which checkpoint translate, evaluate and export read.


@pytest.fixture(scope="module")
def three_models():
    """Tokenizers and three models of different weights, to save as latest, averaged, best."""
    tokenizers = tiny_tokenizers()
    names = ("latest", "averaged", "best")
    return tokenizers, {name: tiny_model(tokenizers, seed=seed) for seed, name in enumerate(names)}


@pytest.fixture
def choice_run(tmp_path, three_models):
    """A run directory with no checkpoint yet, and the three models."""
    tokenizers, models = three_models
    run = RunDir(tmp_path / "run")
    run.write_config({"model": models["latest"].config.to_dict(), "train": {}, "data": {}})
    tokenizers.save(str(run.tokenizers_path))
    return run, models


def _save(run: RunDir, name: str, model) -> str:
    folder = {"latest": run.checkpoints_path, "averaged": run.averaged_path}.get(
        name, run.best_path
    )
    manager = tf.train.CheckpointManager(model_checkpoint(model), str(folder), max_to_keep=1)
    return manager.save(checkpoint_number=7)


def test_run_dir_reads_best_else_averaged_else_latest(tmp_path, choice_run):
    run, models = choice_run
    with pytest.raises(FileNotFoundError, match="No checkpoint"):
        run.checkpoint()
    for name in ("latest", "averaged", "best"):
        path = _save(run, name, models[name])
        assert run.checkpoint() == (name, path)
        _assert_same_weights(run.load_model(), models[name])
    assert run.checkpoint("latest") == ("latest", str(run.checkpoints_path / "ckpt-7"))
    assert run.checkpoint(path) == ("given", path)
    _assert_same_weights(run.load_model("averaged"), models["averaged"])


def _cli_lines(capsys, *args) -> tuple[str, str]:
    assert cli.main([str(a) for a in args]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.mark.slow
def test_translate_and_evaluate_say_which_checkpoint(tmp_path, choice_run, capsys):
    run, models = choice_run
    for name, model in models.items():
        _save(run, name, model)
    options = ["--beam-size", "1", "--max-source-tokens", "8", "--max-new-tokens", "8"]
    _, err = _cli_lines(capsys, "translate", run.root, "o gato .", *options)
    assert err.splitlines() == [f"best checkpoint: {run.best_path / 'ckpt-7'}"]
    _, err = _cli_lines(
        capsys, "translate", run.root, "o gato .", *options, "--checkpoint", "averaged"
    )
    assert err.splitlines() == [f"averaged checkpoint: {run.averaged_path / 'ckpt-7'}"]
    out, _ = _cli_lines(
        capsys,
        "evaluate",
        run.root,
        "--dataset",
        "sample",
        "--split",
        "dev",
        "--limit",
        "4",
        "--quiet",
        "--output",
        tmp_path / "hyp.txt",
        *options,
    )
    assert f"(best checkpoint {run.best_path / 'ckpt-7'}, greedy)" in out


@pytest.mark.slow
def test_export_says_which_checkpoint(tmp_path, choice_run, capsys):
    run, models = choice_run
    for name, model in models.items():
        _save(run, name, model)
    out, _ = _cli_lines(
        capsys,
        "export",
        run.root,
        "--out",
        tmp_path / "base",
        "--beam-size",
        "2",
        "--max-source-tokens",
        "8",
        "--max-new-tokens",
        "8",
    )
    assert f"from the best checkpoint {run.best_path / 'ckpt-7'}" in out.splitlines()[0]


def test_a_mixed_precision_model_is_scored_like_its_float32_weights(three_models):
    tokenizers, models = three_models
    mixed = build_model(models["best"].config, "float16")  # CPUs cannot decode it in float16
    for target, source in zip(mixed.weights, models["best"].weights, strict=True):
        target.assign(source)
    validator = Validator(
        [("o gato bebe leite .", "the cat drinks milk .")], tokenizers, max_tokens=8
    )
    _, hypotheses = validator.score(mixed)
    assert validator.translator(mixed).model.compute_dtype == "float32"
    float32 = Translator(
        tokenizers,
        models["best"],
        config=DecodeConfig(beam_size=1, max_source_tokens=8, max_new_tokens=8),
    )
    assert hypotheses == float32.translate_batch(["o gato bebe leite ."])
