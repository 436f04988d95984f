"""The CLI dispatcher: argument parsing only (each command has its own subprocess tests)."""

import pytest

from tf_transformer.cli import main


def test_sentences_after_an_option_are_still_sentences(monkeypatch):
    from tf_transformer import cli

    seen = {}
    parser_main = cli.build_parser

    def patched():  # the real parser, recording the parsed arguments instead of translating
        parser = parser_main()
        parser._subparsers._group_actions[0].choices["translate"].set_defaults(
            func=lambda args: seen.update(vars(args)) or 0
        )
        return parser

    monkeypatch.setattr(cli, "build_parser", patched)
    assert main(["translate", "RUN", "um", "--beam-size", "1", "dois", "três"]) == 0
    assert seen["run_dir"] == "RUN" and seen["sentences"] == ["um", "dois", "três"]
    assert seen["beam_size"] == 1


def test_unknown_flags_still_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["translate", "RUN", "--no-such-flag"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["evaluate", "RUN", "stray"])  # evaluate takes no extra positionals


def test_stdin_lines_are_text_and_bad_utf8_names_the_line(monkeypatch):
    import argparse
    import io
    import sys

    from tf_transformer.commands.translate import read_sentences

    args = argparse.Namespace(sentences=[])
    stdin = io.TextIOWrapper(io.BytesIO("olá .\r\n\nsegunda\n".encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert read_sentences(args) == ["olá .", "", "segunda"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok\n\xff\xfe\n")))
    with pytest.raises(ValueError, match="Sentence 1 is not valid UTF-8"):
        read_sentences(args)


def test_stdin_from_a_terminal_gets_a_one_line_hint(monkeypatch, capsys):
    import argparse
    import io
    import sys

    from tf_transformer.commands.translate import STDIN_HINT, read_sentences

    class Terminal(io.TextIOWrapper):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal(io.BytesIO("olá .\n".encode())))
    assert read_sentences(argparse.Namespace(sentences=[])) == ["olá ."]
    assert capsys.readouterr().err == STDIN_HINT + "\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ola\n")))  # a pipe: no hint
    assert read_sentences(argparse.Namespace(sentences=[])) == ["ola"]
    assert capsys.readouterr().err == ""


def test_export_and_translate_server_agree_on_the_model_name(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    import tf_transformer.backends.savedmodel.export
    from tf_transformer import cli
    from tf_transformer.commands import DEFAULT_MODEL_NAME

    exported = []

    def export_run_dir(run_dir, out, **options):  # records where the export would go
        exported.append(Path(out))
        return Path(out) / "3"

    monkeypatch.setattr(tf_transformer.backends.savedmodel.export, "export_run_dir", export_run_dir)
    monkeypatch.chdir(tmp_path)
    # A run directory with one checkpoint (of one variable): export says which checkpoint it reads.
    import tensorflow as tf

    checkpoints = tmp_path / "runs" / "sample" / "checkpoints"
    tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), str(checkpoints), 1).save()
    (checkpoints.parent / "config.json").write_text("{}")
    assert main(["export", "runs/sample"]) == 0
    assert exported == [Path("saved_models") / DEFAULT_MODEL_NAME]
    out = capsys.readouterr().out
    assert "from the latest checkpoint runs/sample/checkpoints/ckpt-1" in out
    assert f"--model_name={DEFAULT_MODEL_NAME} " in out
    assert f"--model_base_path={tmp_path / 'saved_models' / DEFAULT_MODEL_NAME}" in out
    assert 'tf-transformer translate --server http://localhost:8501 "o gato bebe ."' in out
    translate_args = cli.build_parser().parse_args(["translate", "--server", "http://x"])
    assert translate_args.model_name == DEFAULT_MODEL_NAME
    # Another base path: its name, and the --model-name to pass.
    assert main(["export", "runs/sample", "--out", "models/pt_en"]) == 0
    out = capsys.readouterr().out
    assert "--model_name=pt_en " in out and "--model-name pt_en" in out


def test_servable_not_found_says_to_pass_model_name(capsys):
    from tests.predict_server import PredictServer

    with PredictServer(None, model_name="pt_en") as server:  # 404 before any model is used
        assert main(["translate", "--server", server.url, "olá ."]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "HTTP 404: Servable not found" in error
    assert "asked for model 'transformer': pass --model-name NAME" in error


def test_the_program_collects_garbage_less_often_and_a_call_from_python_leaves_it():
    import gc
    import json
    import subprocess
    import sys

    from tf_transformer.cli import TRACING_GC_THRESHOLD

    # As the program (arguments from sys.argv), the CLI sets its collector's threshold.
    script = (
        "import gc, sys\n"
        "from tf_transformer import cli\n"
        "sys.argv = ['tf-transformer', 'translate', 'RUN', '--no-such-flag']\n"
        "try:\n"
        "    cli.main()\n"
        "except SystemExit:\n"
        "    print(list(gc.get_threshold()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == list(TRACING_GC_THRESHOLD) != [700, 10, 10]  # the default
    # Called from Python with its arguments, it leaves the caller's collector as it was.
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        with pytest.raises(SystemExit):
            main(["translate", "RUN", "--no-such-flag"])
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
