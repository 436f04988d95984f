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
