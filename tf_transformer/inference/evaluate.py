"""Corpus evaluation with sacreBLEU: BLEU and chrF with their signatures.

How the reported BLEU is computed: sacreBLEU's default `13a` tokenizer on detokenized text,
**lower-cased** (`case:lc` in the signature; our tokenizers lower-case everything, so cased BLEU
mostly measures capitalisation) — the cased score is reported too. TED references
(`ted_hrlr_translate`) are lower-cased and pre-tokenized with the English clitics split off
(`do n't`, `it 's`); `13a` does not split apostrophes, so for TED-style references the hypotheses
are put into the same style with `ted_style` before scoring (detected automatically).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import sacrebleu
from tqdm.auto import tqdm

_CLITIC_NOT = re.compile(r"(\w)n't\b")
_CLITICS = re.compile(r"(\w)'(s|re|ve|ll|d|m)\b")
_SPACED_APOSTROPHE = re.compile(r"(\w) ' (\w)")


def ted_style(text: str) -> str:
    """Lower-cases and splits English clitics as the TED references do: `don't` -> `do n't`."""
    text = _SPACED_APOSTROPHE.sub(r"\1'\2", text.lower())
    text = _CLITIC_NOT.sub(r"\1 n't", text)
    return _CLITICS.sub(r"\1 '\2", text)


def looks_ted_style(references: Sequence[str]) -> bool:
    """True when most references are lower-cased and end in a space-separated punctuation mark."""
    if not references:
        return False
    hits = sum(1 for r in references if r == r.lower() and re.search(r" [.?!]$", r.strip()))
    return hits >= 0.5 * len(references)


@dataclasses.dataclass(frozen=True)
class Scores:
    """Corpus scores with the sacreBLEU signatures that make them reproducible."""

    bleu: float  # lower-cased
    bleu_cased: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    num_sentences: int
    ted_style: bool

    def summary(self) -> str:
        return (
            f"BLEU {self.bleu:.2f} (cased {self.bleu_cased:.2f})  chrF {self.chrf:.2f}  "
            f"on {self.num_sentences} sentences\n"
            f"  BLEU signature: {self.bleu_signature}\n"
            f"  chrF signature: {self.chrf_signature}"
        )


def score(
    hypotheses: Sequence[str], references: Sequence[str], *, ted: bool | None = None
) -> Scores:
    """sacreBLEU BLEU (lower-cased and cased) and chrF of `hypotheses` against `references`.

    Args:
      hypotheses: one detokenized translation per reference.
      references: the reference translations.
      ted: put hypotheses in TED style (see `ted_style`); None detects it from the references.
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses for {len(references)} references; they must align."
        )
    ted = looks_ted_style(references) if ted is None else ted
    if ted:
        hypotheses = [ted_style(h) for h in hypotheses]
    refs = [list(references)]
    # force=True: our outputs end in a spaced " ." by design (and TED references too); it only
    # silences sacreBLEU's "did you forget to detokenize" warning, the score is unchanged.
    bleu = sacrebleu.metrics.BLEU(lowercase=True, force=True)
    bleu_cased = sacrebleu.metrics.BLEU(force=True)
    chrf = sacrebleu.metrics.CHRF()
    return Scores(
        bleu=bleu.corpus_score(hypotheses, refs).score,
        bleu_cased=bleu_cased.corpus_score(hypotheses, refs).score,
        chrf=chrf.corpus_score(hypotheses, refs).score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        num_sentences=len(references),
        ted_style=ted,
    )


def translate_all(
    translate_batch: Callable[[list[str]], list[str]],
    sources: Sequence[str],
    *,
    batch_size: int = 64,
    progress: bool = True,
) -> list[str]:
    """Translates `sources` in batches of similar length (less padding), in the original order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    outputs: list[str] = [""] * len(sources)
    bar = tqdm(total=len(sources), desc="translating", unit="sent", disable=not progress)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        for i, text in zip(chunk, translate_batch([sources[i] for i in chunk]), strict=True):
            outputs[i] = text
        bar.update(len(chunk))
    bar.close()
    return outputs


def evaluate(
    translate_batch: Callable[[list[str]], list[str]],
    pairs: Iterable[tuple[str, str]],
    *,
    batch_size: int = 64,
    hypotheses_path: str | Path | None = None,
    ted: bool | None = None,
    progress: bool = True,
) -> tuple[Scores, list[str]]:
    """Translates the source side of `pairs`, writes the hypotheses (one per line), scores them."""
    pairs = list(pairs)
    sources = [pt for pt, _ in pairs]
    references = [en for _, en in pairs]
    hypotheses = translate_all(translate_batch, sources, batch_size=batch_size, progress=progress)
    if hypotheses_path is not None:
        path = Path(hypotheses_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(h.replace("\n", " ") + "\n" for h in hypotheses), "utf-8")
    return score(hypotheses, references, ted=ted), hypotheses
