"""Tests for `tf-transformer train`: user errors exit 2 with one line, runs are never clobbered."""

import pytest

from tf_transformer.cli import build_parser, main
from tf_transformer.commands.train import configs_from_args

pytestmark = pytest.mark.cost(120)  # seconds in make test (measured)


def _error_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if "error" in line]


def test_bad_flag_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--no-such-flag"])
    assert exit_info.value.code == 2
    assert len(_error_lines(capsys)) == 1


def test_non_positive_steps_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--max-steps", "0"])
    assert exit_info.value.code == 2
    assert "positive" in _error_lines(capsys)[0]


def test_bad_dataset_path_exits_2_and_creates_nothing(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(["train", "--dataset", str(tmp_path / "missing"), "--run-dir", str(run_dir)])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tf-transformer train: error:")
    assert not run_dir.exists()


@pytest.mark.parametrize("extra", [[], ["--epochs", "1"]])
def test_existing_run_dir_is_refused_untouched(tmp_path, capsys, extra):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.json").write_text('{"model": {}}')
    (run_dir / "checkpoints" / "checkpoint").write_text("keep me")
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    code = main(["train", "--run-dir", str(run_dir), *extra])
    assert code == 2
    assert "--resume" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_resume_and_overwrite_exclude_each_other(tmp_path, capsys):
    code = main(["train", "--run-dir", str(tmp_path), "--resume", "--overwrite"])
    assert code == 2 and "exclude" in capsys.readouterr().err


def test_resume_needs_a_run_dir(tmp_path, capsys):
    code = main(["train", "--run-dir", str(tmp_path / "none"), "--resume"])
    assert code == 2 and "not a run directory" in capsys.readouterr().err


def test_flags_override_the_preset_by_paper_names():
    args = build_parser().parse_args(
        ["train", "--preset", "tiny", "--d-model", "48", "--num-heads", "4", "--dff", "96",
         "--warmup-steps", "7", "--label-smoothing", "0.2", "--max-tokens", "100",
         "--token-budget", "900", "--mixed-precision", "bfloat16", "--average-last", "3",
         "--vocab-min-count", "4"]
    )  # fmt: skip
    model_config, train_config = configs_from_args(args)
    assert (model_config.d_model, model_config.num_heads, model_config.dff) == (48, 4, 96)
    assert model_config.max_length == 100 and train_config.max_tokens == 100
    assert train_config.warmup_steps == 7 and train_config.label_smoothing == 0.2
    assert train_config.token_budget == 900 and train_config.average_last == 3
    assert train_config.mixed_precision == "bfloat16" and train_config.vocab_min_count == 4
    assert model_config.num_layers == 1  # from the tiny preset


def test_regularization_flags_reach_the_model_config():
    args = build_parser().parse_args(
        ["train", "--preset", "tiny", "--attention-dropout", "0.1",
         "--activation-dropout", "0.2", "--word-dropout", "0.3"]
    )  # fmt: skip
    model_config, _ = configs_from_args(args)
    rates = model_config.attention_dropout, model_config.activation_dropout
    assert rates == (0.1, 0.2) and model_config.word_dropout == 0.3
    default, _ = configs_from_args(build_parser().parse_args(["train", "--preset", "tiny"]))
    assert default.attention_dropout == default.activation_dropout == default.word_dropout == 0


def test_out_of_range_word_dropout_is_a_user_error(capsys):
    code = main(["train", "--word-dropout", "1.0", "--run-dir", "/nonexistent/x"])
    assert code == 2 and "word_dropout must be in [0, 1)" in capsys.readouterr().err


def test_shared_vocab_and_share_embeddings_flags_are_off_unless_given():
    given = ["train", "--preset", "tiny", "--shared-vocab", "--share-embeddings"]
    model_config, train_config = configs_from_args(build_parser().parse_args(given))
    assert model_config.share_embeddings and train_config.shared_vocab
    model_config, train_config = configs_from_args(build_parser().parse_args(["train"]))
    assert not model_config.share_embeddings and not train_config.shared_vocab


def test_invalid_combination_is_a_user_error(capsys):
    code = main(["train", "--d-model", "30", "--num-heads", "4", "--run-dir", "/nonexistent/x"])
    assert code == 2 and "divisible" in capsys.readouterr().err


def test_help_says_how_the_limits_interact(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Training stops at whichever comes first of the limits given" in text
    assert "The preset's epochs apply only when neither --epochs nor --max-steps is given" in text
    for flag in ("--epochs", "--max-steps N", "--max-minutes"):
        assert flag in text


@pytest.fixture(scope="module")
def steps_run(tmp_path_factory):
    """A tiny run on 4 pairs (2 batches an epoch) with --max-steps 5 and the tiny preset's
    epochs=1: `(run_dir, corpus, exit code, stdout)`."""
    import contextlib
    import io

    from tf_transformer.data.sample import sample_pairs

    root = tmp_path_factory.mktemp("steps")
    corpus = root / "four.tsv"
    corpus.write_text("".join(f"{pt}\t{en}\n" for pt, en in sample_pairs("train")[:4]))
    stdout = io.StringIO()
    arguments = ["train", "--dataset", str(corpus), "--preset", "tiny", "--max-steps", "5"]
    with contextlib.redirect_stdout(stdout):
        code = main([*arguments, "--run-dir", str(root / "run"), "--quiet"])
    return root / "run", corpus, code, stdout.getvalue()


@pytest.mark.slow
def test_max_steps_alone_trains_that_many_steps_past_the_presets_epochs(steps_run):
    import re

    from tests.training.test_logs import read_scalars

    run_dir, _, code, stdout = steps_run
    assert code == 0
    step, epoch = map(int, re.search(r"trained to step (\d+) \(epoch (\d+)\)", stdout).groups())
    # Stopped inside an epoch after completing at least one: the preset's epochs=1 did not end it.
    assert step == 5 and epoch >= 1, stdout
    validation = read_scalars(run_dir / "logs" / "validation")
    assert [s for s, _ in validation["loss"]] == sorted({s for s, _ in validation["loss"]})


@pytest.mark.slow
def test_evaluate_defaults_to_the_runs_own_dataset(steps_run, capsys):
    run_dir, corpus, _, _ = steps_run
    arguments = [
        "--beam-size",
        "1",
        "--max-source-tokens",
        "6",
        "--max-new-tokens",
        "6",
        "--limit",
        "2",
        "--quiet",
    ]
    assert main(["evaluate", str(run_dir), *arguments]) == 0
    out = capsys.readouterr().out
    assert f"dataset: {corpus} (the run's dataset, from {run_dir / 'config.json'})" in out
    assert (run_dir / "hypotheses.four.tsv.test.txt").is_file()


def test_lower_case_source_flag_reaches_train_config():
    given = ["train", "--preset", "tiny", "--lower-case-source"]
    _, train_config = configs_from_args(build_parser().parse_args(given))
    assert train_config.lower_case_source is True and not train_config.shared_vocab
    _, train_config = configs_from_args(build_parser().parse_args(["train"]))
    assert train_config.lower_case_source is False


@pytest.mark.parametrize(
    "preset, flag, expected",
    [
        ("small-data", None, "auto"),  # the preset's: the run resolves it when it starts
        ("mixed-data", None, "auto"),
        ("small-data", "float32", None),
        ("small-data", "bfloat16", "bfloat16"),
        ("tiny", "float16", "float16"),
        ("tiny", "auto", "auto"),
        ("tiny", None, None),
    ],
)
def test_mixed_precision_flag_overrides_the_presets_auto(preset, flag, expected):
    given = ["train", "--preset", preset] + (["--mixed-precision", flag] if flag else [])
    _, train_config = configs_from_args(build_parser().parse_args(given))
    assert train_config.mixed_precision == expected


@pytest.mark.parametrize("trainer", [[], ["--fit"]], ids=["loop", "fit"])
def test_a_non_finite_loss_is_one_line_exit_2_naming_the_good_checkpoint(tmp_path, capsys, trainer):
    from tf_transformer.data.sample import sample_pairs
    from tf_transformer.run_dir import RunDir

    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("".join(f"{pt}\t{en}\n" for pt, en in sample_pairs("train")[:16]))
    run = RunDir(tmp_path / "run")
    blow_up = ["--lr-scale", "1e6", "--warmup-steps", "1", "--checkpoint-every", "1"]
    code = main(
        ["train", "--dataset", str(corpus), "--preset", "tiny", "--max-steps", "20", *blow_up]
        + ["--run-dir", str(run.root), "--quiet", *trainer]
    )
    lines = [line for line in capsys.readouterr().err.splitlines() if "tf-transformer" in line]
    good, bad = (run.checkpoints_path / f"ckpt-{n}" for n in (1, 2))
    expected = (
        "tf-transformer train: error: the loss became nan at step 3 (epoch 1); stopped without "
        f"saving. {bad}, whose weights gave it, was removed; the latest checkpoint is now {good}, "
        "whose weights gave a finite loss. Lower the learning rate (--warmup-steps) or train in "
        "float32, then continue with --resume."
    )
    assert code == 2 and lines == [expected]
    assert run.latest_checkpoint() == str(good)
