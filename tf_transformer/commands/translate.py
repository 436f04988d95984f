"""`tf-transformer translate RUN_DIR [SENTENCE ...]`: translate arguments or stdin lines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tf_transformer.commands import (
    CHECKPOINT_HELP,
    DEFAULT_MODEL_NAME,
    model_loading,
    positive_int,
)

STDIN_HINT = "reading sentences from stdin, one per line; Ctrl-D to finish"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "translate",
        help="Translate Portuguese sentences with a trained run.",
        description=(
            "Translates each SENTENCE, or each line of stdin when none is given, and prints one "
            "translation per line (an empty line for an empty input line)."
        ),
    )
    parser.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        nargs="?",
        default=None,
        help="The trained run directory (omitted with --server: every argument is a sentence).",
    )
    parser.add_argument("sentences", metavar="SENTENCE", nargs="*", help="Portuguese text.")
    parser.add_argument(
        "--beam-size",
        type=positive_int,
        default=4,
        help="Beams per sentence; 1 = greedy (default: 4).",
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=0.6,
        help="GNMT length-penalty exponent alpha for beam search (default: 0.6).",
    )
    parser.add_argument(
        "--max-length",
        type=positive_int,
        default=None,
        help="Most source tokens kept and most tokens generated (default: min(128, the model's)).",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=32, help="Sentences per batch (default: 32)."
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
        help="Translate through TF Serving's REST API at URL (e.g. http://localhost:8501), with "
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
            raise ValueError(f"Sentence {index} is not valid UTF-8: {error}.") from None
    return sentences


def run(args: argparse.Namespace) -> int:
    from tf_transformer.inference.load import saved_model_version

    if args.server:
        return translate_with_server(args)
    if args.run_dir is None:
        raise ValueError("RUN_DIR is required (or --server URL).")
    root = Path(args.run_dir)
    if saved_model_version(root) is None and not root.is_dir():
        raise FileNotFoundError(f"Run directory {root} does not exist.")
    with model_loading(root):
        if saved_model_version(root) is not None:
            translate, attention = _saved_model_functions(args, root)
        else:
            translate, attention = _run_dir_functions(args, root)
    sentences = read_sentences(args)
    for start in range(0, len(sentences), args.batch_size):
        for text in translate(sentences[start : start + args.batch_size]):
            sys.stdout.write(text + "\n")
        sys.stdout.flush()
    if args.plot_attention and sentences:
        import matplotlib.pyplot as plt

        from tf_transformer.plots import plot_attention_heads

        figure = plot_attention_heads(*attention(sentences[0]), args.plot_attention)
        plt.close(figure)
        print(f"Wrote {args.plot_attention}", file=sys.stderr)
    return 0


def _run_dir_functions(args: argparse.Namespace, root: Path):
    """`(translate, attention)` of a run directory's Translator; says on stderr which
    checkpoint it reads (one line)."""
    from tf_transformer.run_dir import RunDir

    run_dir = RunDir(root)
    run_dir.read_config()  # a clear error before TensorFlow loads anything
    from tf_transformer.inference.translator import Translator

    tokenizers = run_dir.load_tokenizers()
    which, checkpoint = run_dir.checkpoint(args.checkpoint)
    print(f"{which} checkpoint: {checkpoint}", file=sys.stderr, flush=True)
    translator = Translator(
        tokenizers,
        run_dir.load_model(checkpoint),
        max_length=args.max_length,
        beam_size=args.beam_size,
        alpha=args.length_penalty,
        jit_compile=args.jit_compile,
    )

    def attention(sentence: str):
        result = translator.translate([sentence], return_attention=True)
        return result["attention"], result["src_tokens"], result["tgt_tokens"]

    return translator.translate_batch, attention


def _saved_model_functions(args: argparse.Namespace, root: Path):
    """`(translate, attention)` of an exported SavedModel: it decodes as exported
    (`--beam-size 1`: its `greedy` signature), attention from its `attention` signature."""
    import tensorflow as tf

    from tf_transformer.inference.load import load_translate_fn, saved_model_version

    translate, _ = load_translate_fn(root, beam_size=args.beam_size)

    def attention(sentence: str):
        signature = tf.saved_model.load(str(saved_model_version(root))).signatures["attention"]
        out = signature(sentence=tf.constant(sentence))
        as_text = lambda tokens: [t.decode("utf-8") for t in tokens.numpy()]
        return (
            out["attention_weights"],
            as_text(out["source_tokens"]),
            as_text(out["target_tokens"]),
        )

    return translate, attention


def translate_with_server(args: argparse.Namespace) -> int:
    """`--server URL`: the sentences go to TF Serving's `:predict` (`inference.serving`)."""
    from tf_transformer.inference.serving import ServingClient, ServingError

    if args.run_dir is not None:  # no run directory with --server: it is the first sentence
        args.sentences = [args.run_dir, *args.sentences]
    sentences = read_sentences(args)
    client = ServingClient(
        args.server,
        args.model_name,
        signature="greedy" if args.beam_size == 1 else "serving_default",
        batch_size=args.batch_size,
    )
    try:
        for start in range(0, len(sentences), args.batch_size):
            for text in client.translate(sentences[start : start + args.batch_size]):
                sys.stdout.write(text + "\n")
            sys.stdout.flush()
    except ServingError as error:
        hint = ""
        if error.status == 404 and "servable not found" in error.message.lower():
            hint = (
                f" (asked for model {args.model_name!r}: pass --model-name NAME, the "
                "--model_name given to tensorflow_model_server)"
            )
        raise ServingError(f"TF Serving: {error}{hint}") from None
    return 0
