"""Translation quality at a fixed CPU budget: train on small real corpora, score on two dev sets.

Run from the repository root::

    .venv/bin/python bench/quality.py --run-dir runs/quality            # train 27 min, evaluate
    .venv/bin/python bench/quality.py --run-dir runs/quality --resume   # continue a stopped run
    .venv/bin/python bench/quality.py --eval-only runs/quality          # evaluate a run again
    .venv/bin/python bench/quality.py --eval-only runs/quality --checkpoint latest --length-penalties 1.0,0.6
    .venv/bin/python bench/quality.py --run-dir runs/q/short --max-minutes 10 --json q.json
    .venv/bin/python bench/quality.py --preset mixed-data --run-dir runs/mixed --max-minutes 60

Training data: Tatoeba train + CrioleSet train from ``--data`` (default ``<repo>/../shared/data``;
deduplicated pairs). A preset of ``MIXES`` (``--preset mixed-data``) trains instead on its five
corpora mixed with its weights (``--dataset-weights`` changes them; ``tf_transformer.data.mix``),
validates on NTREX news dev (which picks the best checkpoint), Tatoeba dev, TED dev and
python-docs dev, and is scored on all four. The wall-clock budget (`--max-minutes`, default 27) covers training (model
building, tracing, steps, validation, checkpoints, averaging); tokenizer building is timed and
reported separately. The minutes used are kept in ``RUN_DIR/quality.json``, so a resumed run gets
what is left.

Evaluation reads only the run directory (config, tokenizers, one checkpoint) and scores sacreBLEU
BLEU (cased, the headline, and lower-cased) and chrF on ``tatoeba_pt_en/dev`` and on
``ted_hrlr_validation/dev`` (domain shift), greedy and beam. The checkpoint is ``--checkpoint``
(``best``, ``averaged``, ``latest`` or a prefix), by default the best one (by dev BLEU while
training, ``--eval-every``), else the averaged one, else the latest: ``RunDir.checkpoint``'s
order; the one used is printed, with the best one's record (``checkpoints/best/best.json``). The
validation history itself is in TensorBoard only (``RUN_DIR/logs/validation``). To compare
checkpoints, run ``--eval-only`` once per ``--checkpoint``. ``--length-penalties 1.0,0.6``
scores beam search at each length penalty (chosen on Tatoeba dev; the best one there is
printed); ``--length-penalty`` (default ``DecodeConfig``'s, 1.0) scores one. The last line is
machine-readable; its figures are beam search at the first length penalty given, greedy with
``--beam-size 1``::

    quality: tatoeba_dev_bleu=<cased> tatoeba_dev_bleu_lc=... chrf=... ted_dev_bleu_lc=...
    minutes=... steps=...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from json_figures import add_json_flags, write_json

from tf_transformer.config import PRESETS, TRAIN_PRESETS, DecodeConfig
from tf_transformer.errors import TransformerError
from tf_transformer.hardware.cpu import describe_cpu

DATA = REPO.parent / "shared" / "data"
TRAIN_CORPORA = ("tatoeba_pt_en", "crioleset")
DEV_SETS = {"tatoeba_dev": "tatoeba_pt_en", "ted_dev": "ted_hrlr_validation"}
# Presets that train on a mix: its corpora and their sampling weights (`--dataset-weights`).
# Proportional to size, the documentation corpora would be 80% of the pairs (issue 34's naive
# run lost 9 BLEU on Tatoeba dev); these give everyday speech 40%. Not yet tuned by full runs.
MIXES = {
    "mixed-data": {
        "tatoeba_pt_en": 0.30,
        "crioleset": 0.10,
        "python_docs_pt_en": 0.35,
        "gnome_debian_docs_pt_en": 0.15,
        "tldr_pt_en": 0.10,
    },
}
# The dev sets of a mixed run, in order: the first picks the best checkpoint while training.
MIX_DEV_SETS = {
    "ntrex_dev": "ntrex_news",
    "tatoeba_dev": "tatoeba_pt_en",
    "ted_dev": "ted_hrlr_validation",
    "python_docs_dev": "python_docs_pt_en",
}

MODEL_KNOBS = {
    "num_layers": int,
    "d_model": int,
    "num_heads": int,
    "dff": int,
    "dropout_rate": float,
    "attention_dropout": float,
    "activation_dropout": float,
    "word_dropout": float,
    "norm_first": bool,  # --norm-first / --no-norm-first
    "share_target_embeddings": bool,
    "share_embeddings": bool,  # needs --shared-vocab
}
TRAIN_KNOBS = {
    "warmup_steps": int,
    "lr_scale": float,
    "cooldown": float,
    "label_smoothing": float,
    "vocab_size": int,
    "vocab_min_count": int,
    "shared_vocab": bool,
    "lower_case_source": bool,
    "truecase_target": bool,
    "concat_fraction": float,
    "token_budget": int,
    "max_tokens": int,
    "max_steps": int,
    "average_last": int,
    "checkpoint_every": int,
    "eval_every": int,
    "eval_sentences": int,
    "seed": int,
}


def corpora(preset: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The training corpora and the dev sets (name -> folder) of a preset's benchmark."""
    if preset in MIXES:
        return tuple(MIXES[preset]), MIX_DEV_SETS
    return TRAIN_CORPORA, DEV_SETS


def data_root(path: str | None, preset: str) -> Path:
    root = Path(path) if path else DATA
    train, dev = corpora(preset)
    missing = [
        name for name in dict.fromkeys((*train, *dev.values())) if not (root / name).is_dir()
    ]
    if missing:
        sys.exit(
            f"error: the benchmark data is not there: {root} lacks {', '.join(missing)} "
            "(expected <repo>/../shared/data, or pass --data DIR)."
        )
    return root


def training_pairs(root: Path) -> list[tuple[str, str]]:
    """Tatoeba train + CrioleSet train, exact duplicate pairs dropped (first one kept)."""
    from tf_transformer.data import load_dataset

    pairs = []
    for name in TRAIN_CORPORA:
        for pt, en in load_dataset(root / name, "train").as_numpy_iterator():
            pairs.append((pt.decode("utf-8"), en.decode("utf-8")))
    unique = list(dict.fromkeys(pairs))
    print(f"training pairs: {len(pairs)} read, {len(unique)} unique")
    return unique


def configs(args):
    """The model and training configs of a new run: the preset, then the flags."""
    model_config = PRESETS[args.preset].replace(
        **{k: getattr(args, k) for k in MODEL_KNOBS if getattr(args, k) is not None}
    )
    train_config = TRAIN_PRESETS[args.preset].replace(
        **{k: getattr(args, k) for k in TRAIN_KNOBS if getattr(args, k) is not None}
    )
    model_config = model_config.replace(
        max_length=max(model_config.max_length, train_config.max_tokens)
    )
    if model_config.share_embeddings and not train_config.shared_vocab:
        sys.exit("error: --share-embeddings needs --shared-vocab (one vocabulary for both).")
    return model_config, train_config


def mixed_data(args, root: Path):
    """The `DataConfig` of a mixed preset: its corpora and weights, its dev sets in order."""
    from tf_transformer.config import DataConfig

    weights = MIXES[args.preset]
    return DataConfig(
        dataset=tuple(str(root / name) for name in weights),
        dataset_weights=args.dataset_weights or tuple(weights.values()),
        dev_set=tuple(str(root / folder) for folder in MIX_DEV_SETS.values()),
    )


def train_within_budget(args, root: Path) -> None:
    """Builds tokenizers (or reloads them) and trains until the budget is spent."""
    from tf_transformer import training
    from tf_transformer.config import DataConfig
    from tf_transformer.data.sources import pairs_to_dataset
    from tf_transformer.run_dir import RunDir
    from tf_transformer.training.start.inputs import prepare_tokenizers

    run = RunDir(args.run_dir)
    budget_path = run.root / "quality.json"
    if run.exists() and not args.resume:
        sys.exit(f"error: {run.root} exists; pass --resume to continue it or use a new --run-dir.")
    if args.resume and not run.exists():
        sys.exit(f"error: --resume: {run.root} is not a run directory.")
    record = json.loads(budget_path.read_text()) if budget_path.is_file() else {}
    budget = args.max_minutes if args.max_minutes is not None else record.get("budget", 27.0)
    record.update(budget=budget, minutes_used=record.get("minutes_used", 0.0))
    if args.preset in MIXES:  # training.run loads and mixes the corpora itself
        data, pairs = mixed_data(args, root), None
    else:
        pairs = pairs_to_dataset(training_pairs(root))
        # Recorded in config.json; the training pairs are Tatoeba + CrioleSet, validation Tatoeba.
        data = DataConfig(dataset=str(root / "tatoeba_pt_en"))
    model_config = train_config = None
    changes = {}
    if args.resume:
        changes = {k: getattr(args, k) for k in ("max_steps", "average_last")}
        changes = {k: v for k, v in changes.items() if v is not None}
    else:
        model_config, train_config = configs(args)
        started = time.monotonic()
        if run.tokenizers_path.is_dir():  # left by a run that stopped before training
            print(f"reusing the tokenizers in {run.tokenizers_path}")
        # Built here to time them apart; `training.run` then reuses them from the run dir.
        if pairs is None:
            from tf_transformer.data.mix import Mix

            text = Mix.load(data)  # the vocabulary sample `training.run` would draw
        prepare_tokenizers(
            run, text if pairs is None else pairs, data, train_config, progress=not args.quiet
        )
        record["tokenizer_minutes"] = (time.monotonic() - started) / 60
        print(f"tokenizers: {record['tokenizer_minutes']:.2f} min (outside the training budget)")
        budget_path.parent.mkdir(parents=True, exist_ok=True)
        budget_path.write_text(json.dumps(record, indent=2))
    left = budget - record["minutes_used"]
    if left <= 0:
        print(f"budget spent ({record['minutes_used']:.1f} of {budget} min): not training")
        return
    changes["max_minutes"] = left
    started = time.monotonic()
    try:
        result = training.run(
            run.root,
            data,
            model_config,
            train_config,
            train_changes=changes,
            train_pairs=pairs,
            progress=not args.quiet,
        )
    finally:
        record["minutes_used"] += (time.monotonic() - started) / 60
        budget_path.write_text(json.dumps(record, indent=2))
    record.update(step=result.step, epoch=result.epoch, stopped_by=result.stopped_by)
    budget_path.write_text(json.dumps(record, indent=2))
    print(
        f"trained: step {result.step}, epoch {result.epoch}, stopped by {result.stopped_by}, "
        f"{record['minutes_used']:.1f} min used; averaged: {result.averaged_checkpoint}"
    )
    if result.stopped_by is not None and result.stopped_by.by_signal:
        sys.exit(f"interrupted: continue with --resume --run-dir {run.root}")


def evaluate_run(args, root: Path) -> dict:
    """Scores the run directory's model on the dev sets, greedy and beam."""
    from tf_transformer.inference.evaluate import evaluate
    from tf_transformer.inference.translator import Translator
    from tf_transformer.run_dir import RunDir

    run = RunDir(args.run_dir)
    try:  # --checkpoint, else best > averaged > latest (RunDir.checkpoint's order)
        checkpoint, prefix = run.checkpoint(args.checkpoint)
    except (FileNotFoundError, TransformerError) as error:  # none, or none whole
        sys.exit(f"error: {error}")
    if checkpoint == "given":
        checkpoint = Path(prefix).name
    model = run.load_model(prefix)
    tokenizers = run.load_tokenizers()
    translator = Translator(tokenizers, model)  # both caps: min(128, the model's max_length)
    budget_path = run.root / "quality.json"
    record = json.loads(budget_path.read_text()) if budget_path.is_file() else {}
    how = "--checkpoint" if args.checkpoint else "best > averaged > latest"
    print(
        f"evaluating {run.root}: the {checkpoint} checkpoint ({how}), {prefix}; "
        f"training step {record.get('step', '?')}"
    )
    best = run.best_record()
    if best is not None:  # best.json: the best evaluation while training (greedy, dev subset)
        print(
            f"  checkpoints/best while training: step {best['step']}, dev BLEU {best['bleu']:.1f} "
            f"(lower-cased {best['bleu_lc']:.1f}) chrF {best['chrf']:.1f} on "
            f"{best['num_sentences']} sentences, {best['evaluations_since']} evaluations since"
        )
    decodings = {"greedy": (1, 0.0)}
    for penalty in args.length_penalties if args.beam_size > 1 else ():
        decodings[f"beam{args.beam_size} lp={penalty:g}"] = (args.beam_size, penalty)
    # The figures of the last line: beam search at the first length penalty (greedy with
    # --beam-size 1).
    headline = list(decodings)[min(1, len(decodings) - 1)]
    results = {}
    for dev, folder in corpora(args.preset_of_run)[1].items():
        if dev == "ted_dev" and args.skip_ted:
            continue
        from tf_transformer.data import load_dataset

        pairs = [
            (pt.decode("utf-8"), en.decode("utf-8"))
            for pt, en in load_dataset(root / folder, "dev").as_numpy_iterator()
        ][: args.dev_limit]
        for name, (beam_size, penalty) in decodings.items():
            start = time.monotonic()
            scores, _ = evaluate(
                lambda batch, b=beam_size, p=penalty: translator.translate_batch(
                    batch, config=DecodeConfig(beam_size=b, length_penalty=p)
                ),
                pairs,
                hypotheses_path=run.root
                / "hypotheses"
                / Path(checkpoint).name
                / f"{dev}.{beam_size}.{penalty:g}.txt",
                progress=not args.quiet,
            )
            results[(dev, name)] = scores
            print(
                f"  {dev:12s} {name:14s} BLEU {scores.bleu:5.2f} (lower-cased {scores.bleu_lc:5.2f})"
                f" chrF {scores.chrf:5.2f}  {len(pairs)} sent, {time.monotonic() - start:.0f} s"
            )
    print_table(results, record, headline)
    return results


def print_table(results: dict, record: dict, headline: str) -> None:
    print()
    print("| dev set | decoding | BLEU (cased) | BLEU (lc) | chrF |")
    print("|---|---|---|---|---|")
    for (dev, name), scores in results.items():
        print(f"| {dev} | {name} | {scores.bleu:.1f} | {scores.bleu_lc:.1f} | {scores.chrf:.1f} |")
    if results:
        any_scores = next(iter(results.values()))
        print(f"BLEU signature: {any_scores.bleu_signature}")
        print(f"BLEU (lc) signature: {any_scores.bleu_lc_signature}")
        print(f"chrF signature: {any_scores.chrf_signature}")
    beams = [
        (name, s) for (dev, name), s in results.items() if dev == "tatoeba_dev" and " lp=" in name
    ]
    if len(beams) > 1:  # --length-penalties: the one to choose on dev
        top = max(beams, key=lambda item: (item[1].bleu, item[1].chrf))[0]
        listed = ", ".join(f"{name.split('lp=')[1]}: {s.bleu:.1f}" for name, s in beams)
        print(
            f"tatoeba_dev cased BLEU by length penalty: {listed}; "
            f"best length penalty {top.split('lp=')[1]}"
        )
    best = {dev: scores for (dev, name), scores in results.items() if name == headline}
    fields = []
    if "tatoeba_dev" in best:
        fields += [
            f"tatoeba_dev_bleu={best['tatoeba_dev'].bleu:.1f}",
            f"tatoeba_dev_bleu_lc={best['tatoeba_dev'].bleu_lc:.1f}",
            f"chrf={best['tatoeba_dev'].chrf:.1f}",
        ]
    if "ted_dev" in best:
        fields.append(f"ted_dev_bleu_lc={best['ted_dev'].bleu_lc:.1f}")
    fields += [
        f"{dev}_bleu={best[dev].bleu:.1f}"
        for dev in ("ntrex_dev", "python_docs_dev")
        if dev in best
    ]
    fields.append(f"minutes={record.get('minutes_used', float('nan')):.0f}")
    fields.append(f"steps={record.get('step', '?')}")
    print("quality: " + " ".join(fields))


def validation_history(run_root: Path) -> list[dict]:
    """The dev scores logged while training (`logs/validation`), as TensorBoard reads them:
    `[{"step": 500, "bleu": ..., "bleu_lc": ..., "chrf": ...}, ...]` in step order."""
    import tensorflow as tf
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_root / "logs" / "validation"))
    events.Reload()
    steps: dict[int, dict] = {}
    for tag in ("bleu", "bleu_lc", "chrf"):
        if tag in events.Tags()["tensors"]:
            for event in events.Tensors(tag):
                row = steps.setdefault(event.step, {"step": event.step})
                row[tag] = float(tf.make_ndarray(event.tensor_proto))
    return [steps[step] for step in sorted(steps)]


def quality_figures(args, results: dict) -> dict:
    """The --json figures: the run's record, every score, and the validation history."""
    run_root = Path(args.run_dir)
    budget_path = run_root / "quality.json"
    best = run_root / "checkpoints" / "best" / "best.json"
    return {
        "run_dir": str(args.run_dir),
        "record": json.loads(budget_path.read_text()) if budget_path.is_file() else {},
        "best": json.loads(best.read_text()) if best.is_file() else None,
        "scores": [
            {"dev": dev, "decoding": name, "bleu": s.bleu, "bleu_lc": s.bleu_lc, "chrf": s.chrf}
            for (dev, name), s in results.items()
        ],
        "validation": validation_history(run_root),
    }


def run_dataset(run_dir: str) -> list[str] | None:
    """The corpora a run's config.json records (None without one)."""
    config = Path(run_dir) / "config.json"
    if not config.is_file():
        return None
    dataset = json.loads(config.read_text()).get("data", {}).get("dataset")
    return [dataset] if isinstance(dataset, str) else dataset


def penalty_list(text: str) -> list[float]:
    """`--length-penalties 0.6,1.0` → [0.6, 1.0]: distinct values >= 0, in the order given."""
    try:
        penalties = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of numbers: {text!r}"
        ) from None
    if min(penalties) < 0 or len(set(penalties)) != len(penalties):
        raise argparse.ArgumentTypeError(
            f"length penalties must be distinct and >= 0, got {text!r}"
        )
    return penalties


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default="runs/quality")
    parser.add_argument("--resume", action="store_true", help="Continue --run-dir.")
    parser.add_argument("--eval-only", metavar="RUN_DIR", help="Only evaluate this run.")
    parser.add_argument("--data", default=None, help="Default: <repo>/../shared/data.")
    parser.add_argument("--preset", default="small-data", choices=sorted(TRAIN_PRESETS))
    parser.add_argument("--max-minutes", type=float, default=None, help="Default 27.")
    parser.add_argument(
        "--dataset-weights",
        type=lambda text: tuple(float(w) for w in text.split(",")),
        default=None,
        metavar="W1,W2,...",
        help=f"A mixed preset's corpus weights, in the order {', '.join(MIXES['mixed-data'])}.",
    )
    for name, kind in (*MODEL_KNOBS.items(), *TRAIN_KNOBS.items()):
        flag = f"--{name.replace('_', '-')}"
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None)
        else:
            parser.add_argument(flag, type=kind, default=None)
    parser.add_argument("--beam-size", type=int, default=4, help="1: greedy only.")
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        help=f"Beam length penalty (default: DecodeConfig's, {DecodeConfig.DEFAULT_LENGTH_PENALTY:g}).",
    )
    parser.add_argument(
        "--length-penalties",
        type=penalty_list,
        default=None,
        metavar="A,B,...",
        help="Score beam search at each length penalty (e.g. 0.6,1.0); the last line reports "
        "the first. Replaces --length-penalty.",
    )
    parser.add_argument(
        "--checkpoint",
        default=None,
        help="best | averaged | latest | PREFIX (default: best, else averaged, else latest).",
    )
    parser.add_argument("--dev-limit", type=int, default=None, help="First N dev pairs only.")
    parser.add_argument("--skip-ted", action="store_true", help="Tatoeba dev only.")
    parser.add_argument("--quiet", action="store_true", help="No progress bars.")
    add_json_flags(parser)
    args = parser.parse_args()
    print(describe_cpu(), flush=True)  # what the figures were measured on
    if args.length_penalties is not None and args.length_penalty is not None:
        parser.error("--length-penalty and --length-penalties: give one of them.")
    if args.length_penalties is not None and args.beam_size < 2:
        parser.error("--length-penalties needs beam search (--beam-size 2 or more).")
    if args.length_penalties is None:
        one = args.length_penalty
        args.length_penalties = [DecodeConfig.DEFAULT_LENGTH_PENALTY if one is None else one]
    if args.dataset_weights and args.preset not in MIXES:
        parser.error(f"--dataset-weights is for a mixed preset ({', '.join(MIXES)}).")
    if args.eval_only:
        args.run_dir = args.eval_only
    # Evaluated on the dev sets of the preset the run was trained with (a mix: all four).
    args.preset_of_run = args.preset
    dataset = run_dataset(args.run_dir) if args.eval_only else None
    if dataset is not None and len(dataset) > 1:
        args.preset_of_run = next(iter(MIXES))
    root = data_root(args.data, args.preset_of_run)
    if not args.eval_only:
        train_within_budget(args, root)
    results = evaluate_run(args, root)
    write_json(args, "quality", quality_figures(args, results))


if __name__ == "__main__":
    main()
