"""Corpus evaluation with sacreBLEU: BLEU and chrF with their signatures.

The headline is sacreBLEU's default: **cased** BLEU with its `13a` tokenizer on detokenized text
(`case:mixed` in the signature), the number a user of any translator quotes. Lower-cased BLEU
(`bleu_lc`, `case:lc`) and chrF are reported beside it.

Some references are lower-cased and pre-tokenized: TED (`ted_hrlr_translate`) splits punctuation
and the English clitics off (`do n't`, `it 's`; double quotes become two marks, `` and ''), and
so does the embedded sample corpus. `13a` does not split apostrophes, and a cased hypothesis
never matches a lower-cased reference, so for such references (detected by `looks_ted_style`)
the hypotheses are put into the same style with `ted_style` before scoring: "Don't go." →
"do n't go .".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import sacrebleu
from tqdm.auto import tqdm

from tf_transformer.errors import InvalidValueError

# "don ' t": what tokenizers wrote before they re-attached clitics.
_SPACED_CLITIC = re.compile(r"(\w) ' (s|t|re|ve|ll|d|m)\b")
_DOUBLE_QUOTE = re.compile(r'"')
_SPLIT_ALWAYS = re.compile(r"([!?;()\[\]{}…—–])")
_SPLIT_OUTSIDE_NUMBERS = re.compile(r"(?<!\d)([,:])|([,:])(?!\d)")  # "1,000" and "10:30" stay
_ELLIPSIS = re.compile(r"\.{2,}")
_KEPT_WITH_PERIODS = re.compile(
    r"\.{2,}|(?:\w\.){2,}|(?:mr|mrs|ms|dr|st|jr|sr|vs)\.|\w+\.(?:com|org|net|edu|gov)"
)
_PERIOD = re.compile(r"\.(?!\d)|(?<!\d)\.")  # any period but one inside a number ("3.5")
_CLITIC_NOT = re.compile(r"(\w)n['’]t\b")
_CLITICS = re.compile(r"(\w)['’](s|re|ve|ll|d|m)\b")
_CLOSING_APOSTROPHE = re.compile(r"(\w)['’](?=\s|$)")  # "the students' books", "'yes'"


def _split_periods(word: str) -> str:
    return word if _KEPT_WITH_PERIODS.fullmatch(word) else _PERIOD.sub(" . ", word)


def ted_style(text: str) -> str:
    """Puts detokenized text in the style of the TED references: lower-cased, tokenized.

    Punctuation is split off (but not from numbers, "u.s.", "mr." or "flor.com"), clitics are
    split ("don't" → "do n't", "it's" → "it 's"), and double quotes become `` and '' in turn.

    Example:
        >>> ted_style('Don\'t go, he said: "It\'s late."')
        "do n't go , he said : `` it 's late . ''"
    """
    text = _SPACED_CLITIC.sub(r"\1'\2", text.lower())
    parts = _DOUBLE_QUOTE.split(text)
    text = parts[0] + "".join(
        (" `` " if index % 2 == 0 else " '' ") + part for index, part in enumerate(parts[1:])
    )
    text = _SPLIT_ALWAYS.sub(r" \1 ", text)
    text = _SPLIT_OUTSIDE_NUMBERS.sub(lambda m: f" {m.group()} ", text)
    text = _ELLIPSIS.sub(lambda m: f" {m.group()} ", text)
    text = " ".join(_split_periods(word) for word in text.split())
    text = _CLITIC_NOT.sub(r"\1 n't", text)
    text = _CLITICS.sub(r"\1 '\2", text)
    text = _CLOSING_APOSTROPHE.sub(r"\1 '", text)
    return " ".join(text.split())


def looks_ted_style(references: Sequence[str]) -> bool:
    """True when most references are lower-cased and end in a space-separated punctuation mark
    (pre-tokenized text such as TED's or the sample corpus's: "i was worried .")."""
    if not references:
        return False
    hits = sum(1 for r in references if r == r.lower() and re.search(r" [.?!]$", r.strip()))
    return hits >= 0.5 * len(references)


@dataclasses.dataclass(frozen=True)
class Scores:
    """Corpus scores with the sacreBLEU signatures that make them reproducible.

    Attributes:
        bleu: cased BLEU, sacreBLEU's default (the headline).
        bleu_lc: lower-cased BLEU.
        chrf: chrF (cased).
        bleu_signature, bleu_lc_signature, chrf_signature: their sacreBLEU signatures.
        num_sentences: the number of references.
        ted_style: the hypotheses were put in the references' lower-cased, tokenized style
            (then `bleu` equals `bleu_lc`: both sides are lower-case).
    """

    bleu: float
    bleu_lc: float
    chrf: float
    bleu_signature: str
    bleu_lc_signature: str
    chrf_signature: str
    num_sentences: int
    ted_style: bool

    def summary(self) -> str:
        style = (
            "\n  references are lower-cased and tokenized: hypotheses put in their style"
            if self.ted_style
            else ""
        )
        return (
            f"BLEU {self.bleu:.2f} (lower-cased {self.bleu_lc:.2f})  chrF {self.chrf:.2f}  "
            f"on {self.num_sentences} sentences\n"
            f"  BLEU signature: {self.bleu_signature}\n"
            f"  BLEU lower-cased signature: {self.bleu_lc_signature}\n"
            f"  chrF signature: {self.chrf_signature}{style}"
        )


def score(
    hypotheses: Sequence[str], references: Sequence[str], *, ted: bool | None = None
) -> Scores:
    """sacreBLEU BLEU (cased and lower-cased) and chrF of `hypotheses` against `references`.

    Args:
      hypotheses: one detokenized translation per reference.
      references: the reference translations.
      ted: put hypotheses in TED style (see `ted_style`); None detects it from the references.
    """
    if len(hypotheses) != len(references):
        raise InvalidValueError(
            f"{len(hypotheses)} hypotheses for {len(references)} references; they must align."
        )
    ted = looks_ted_style(references) if ted is None else ted
    if ted:
        hypotheses = [ted_style(h) for h in hypotheses]
    refs = [list(references)]
    # force=True: pre-tokenized references (and hypotheses put in their style) end in a spaced
    # " ."; it only silences sacreBLEU's "did you forget to detokenize" warning.
    bleu = sacrebleu.metrics.BLEU(force=True)
    bleu_lc = sacrebleu.metrics.BLEU(lowercase=True, force=True)
    chrf = sacrebleu.metrics.CHRF()
    return Scores(
        bleu=bleu.corpus_score(hypotheses, refs).score,
        bleu_lc=bleu_lc.corpus_score(hypotheses, refs).score,
        chrf=chrf.corpus_score(hypotheses, refs).score,
        bleu_signature=str(bleu.get_signature()),
        bleu_lc_signature=str(bleu_lc.get_signature()),
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
        raise InvalidValueError(f"batch_size must be positive, got {batch_size}.")
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
