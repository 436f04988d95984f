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
