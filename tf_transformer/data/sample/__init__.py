"""A Portuguese→English parallel corpus generated from a small grammar, offline and seeded: the
data specs `sample` and `sample_written`.

- `grammar`: sentence structures and their Portuguese and English realizations (the phenomena
  the corpus teaches are listed there);
- `lexicon`: the words, with their forms;
- `pairs`: `sample_pairs`, the seeded splits;
- `written_style`: the same pairs capitalised and punctuated as people write them.
"""

from tf_transformer.data.sample.grammar import MOODS, PHENOMENA, NounPhrase, Sentence, realize
from tf_transformer.data.sample.pairs import SPLIT_SIZES, STYLES, sample_pairs

__all__ = [
    "MOODS",
    "PHENOMENA",
    "SPLIT_SIZES",
    "STYLES",
    "NounPhrase",
    "Sentence",
    "realize",
    "sample_pairs",
]
