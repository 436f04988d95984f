"""`tf-transformer translate RUN_DIR [SENTENCE ...]`: translate arguments or stdin lines;
`--file IN [--output OUT]`: a whole text, sentence by sentence, its layout kept."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tf_transformer.commands import (
    CHECKPOINT_HELP,
    DEFAULT_MODEL_NAME,
    add_decoding_arguments,
    decode_config,
    model_loading,
    positive_int,
)
from tf_transformer.errors import InvalidValueError, MissingFileError

STDIN_HINT = "reading sentences from stdin, one per line; Ctrl-D to finish"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "translate",
        help="Translate Portuguese sentences with a trained run.",
        description=(
            "Translates each SENTENCE, or each line of stdin when none is given, and prints one "
            "translation per line (an empty line for an empty input line). With --file, "
            "translates a text: each line is split into sentences, which are translated in "
            "batches and put back, keeping line breaks, blank lines and spacing."
        ),
    )
    parser.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        nargs="?",
        default=None,
        help="The trained run directory, an exported SavedModel or a LiteRT export (omitted "
        "with --server: every argument is a sentence).",
    )
    parser.add_argument("sentences", metavar="SENTENCE", nargs="*", help="Portuguese text.")
    add_decoding_arguments(
        parser,
        "A run directory decodes with these; a SavedModel or --server decodes as it was "
        "exported: it takes --beam-size 1 (its greedy signature) or its export's settings, and "
        "refuses others.",
    )
    parser.add_argument(
        "--file",
        metavar="IN",
        default=None,
        help="Translate this UTF-8 text file (paragraphs: split into sentences, layout kept).",
    )
    parser.add_argument(
        "--output",
        metavar="OUT",
        default=None,
        help="With --file: write the translation here (atomically) instead of stdout.",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=32, help="Sentences per batch (default: 32)."
    )
    parser.add_argument(
        "--n-best",
        type=positive_int,
        default=None,
        metavar="K",
        help="Print each sentence's K best distinct translations, best first, as lines "
        "`INDEX ||| TRANSLATION` (INDEX: the sentence's, from 0; fewer lines when beams read "
        "alike). Beam search with at least K beams; a SavedModel gives at most its export's "
        "beam size.",
    )
    parser.add_argument("--checkpoint", default=None, metavar="CHECKPOINT", help=CHECKPOINT_HELP)
    parser.add_argument(
        "--plot-attention",
        metavar="PNG",
        default=None,
        help="Write the first sentence's cross-attention heads (last decoder layer) to PNG.",
    )
    parser.add_argument(
        "--jit-compile", action="store_true", help="XLA-compile decoding (per input shape)."
    )
    parser.add_argument(
        "--server",
        metavar="URL",
        default=None,
        help="Translate through TF Serving at URL: REST (http://localhost:8501) or gRPC "
        "(grpc://localhost:8500), with "
        "the export's beam size (--beam-size 1: its greedy signature).",
    )
    parser.add_argument(
        "--model-name",
        default=DEFAULT_MODEL_NAME,
        metavar="NAME",
        help="With --server: the name the model is served under (tensorflow_model_server "
        f"--model_name; default: {DEFAULT_MODEL_NAME}, the name `export` files it under).",
    )
    parser.set_defaults(func=run, extra_positionals="sentences")


def read_sentences(args: argparse.Namespace) -> list[str]:
    """The SENTENCE arguments, or stdin's lines; a line that is not UTF-8 is a ValueError.

    Reading a terminal, it first says so on stderr (one line), rather than wait silently.
    """
    if args.sentences:
        return list(args.sentences)
    if sys.stdin.isatty():
        print(STDIN_HINT, file=sys.stderr, flush=True)
    sentences = []
    for index, line in enumerate(sys.stdin.buffer.read().splitlines()):
        try:
            sentences.append(line.rstrip(b"\r").decode("utf-8"))
        except UnicodeDecodeError as error:
            raise InvalidValueError(f"Sentence {index} is not valid UTF-8: {error}.") from None
    return sentences


def read_document(args: argparse.Namespace) -> str:
    """The text of --file (checked before the model loads)."""
    if args.sentences:
        raise InvalidValueError("--file translates a file: give no SENTENCE arguments with it.")
    path = Path(args.file)
    if not path.is_file():
        raise MissingFileError(f"--file {path}: no such file.")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidValueError(f"--file {path} is not UTF-8 text: {error}.") from None


def write_document(args: argparse.Namespace, translator) -> None:
    """Translates --file's text and writes it to --output or stdout."""
    translation = translator.translate_document(args.document, batch_size=args.batch_size)
    if args.output is None:
        sys.stdout.write(translation)
        sys.stdout.flush()
        return
    from tf_transformer.atomic_files import write_text

    write_text(args.output, translation)
    print(f"Wrote {args.output}", file=sys.stderr)


def write_translations(args: argparse.Namespace, translator) -> list[str]:
    """--file's text translated as a document, or the sentences (arguments or stdin) translated
    `--batch-size` at a time, one line each on stdout; returns the sentences (none for --file)."""
    if args.document is not None:
        write_document(args, translator)
        return []
    sentences = read_sentences(args)
    for start in range(0, len(sentences), args.batch_size):
        batch = sentences[start : start + args.batch_size]
        if args.n_best is None:
            lines = translator.translate(batch)
        else:
            lines = [
                f"{start + index} ||| {text}"
                for index, texts in enumerate(translator.translate_n_best(batch, args.n_best))
                for text in texts
            ]
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return sentences


def run(args: argparse.Namespace) -> int:
    from tf_transformer.backends import detect, open_translator

    if args.output is not None and args.file is None:
        raise InvalidValueError("--output goes with --file (the text to translate).")
    if args.n_best is not None and args.file is not None:
        raise InvalidValueError(
            "--n-best lists a sentence's translations: give sentences, not --file."
        )
    args.document = None if args.file is None else read_document(args)
    if args.server:
        return translate_with_server(args)
    if args.run_dir is None:
        raise InvalidValueError("RUN_DIR is required (or --server URL).")
    root = Path(args.run_dir)
    if detect(root) is None and not root.is_dir():
        raise MissingFileError(f"Run directory {root} does not exist.")
    with model_loading(root):
        translator = open_translator(
            root, decode_config(args), checkpoint=args.checkpoint, jit_compile=args.jit_compile
        )
    if translator.checkpoint is not None:  # a run directory: say which of its checkpoints
        print("{} checkpoint: {}".format(*translator.checkpoint), file=sys.stderr, flush=True)
    sentences = write_translations(args, translator)
    if args.plot_attention and sentences:
        import matplotlib.pyplot as plt

        from tf_transformer.plots import plot_attention_heads

        figure = plot_attention_heads(*translator.attention(sentences[0]), args.plot_attention)
        plt.close(figure)
        print(f"Wrote {args.plot_attention}", file=sys.stderr)
    return 0


def translate_with_server(args: argparse.Namespace) -> int:
    """`--server URL`: the sentences go to TF Serving's Predict, over REST or gRPC
    (`backends.savedmodel.rest_client`, `backends.savedmodel.grpc_client`)."""
    from tf_transformer.backends import open_translator
    from tf_transformer.backends.savedmodel.client import ServingError

    if args.run_dir is not None:  # no run directory with --server: it is the first sentence
        args.sentences = [args.run_dir, *args.sentences]
    if args.plot_attention or args.jit_compile:
        raise InvalidValueError(
            "--plot-attention and --jit-compile need the model itself (a run directory or a "
            "SavedModel), not --server."
        )
    client = open_translator(
        args.server,
        decode_config(args),
        checkpoint=args.checkpoint,
        model_name=args.model_name,
        batch_size=args.batch_size,
    )
    try:
        write_translations(args, client)
    except ServingError as error:
        hint = ""
        if error.not_found and "servable not found" in error.message.lower():
            hint = (
                f" (asked for model {args.model_name!r}: pass --model-name NAME, the "
                "--model_name given to tensorflow_model_server)"
            )
        raise ServingError(f"TF Serving: {error}{hint}") from None
    return 0
