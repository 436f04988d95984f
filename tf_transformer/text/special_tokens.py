"""The reserved tokens at the head of every vocabulary, and their ids: defined once, here.

The tokenizers write these first in each vocabulary; the masks, the loss, the data pipeline and
the decoders read the ids from here (this module imports nothing, so the model side does not
need TF Text).
"""

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
PAD_ID, UNK_ID, START_ID, END_ID = range(len(RESERVED_TOKENS))
