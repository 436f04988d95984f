"""Text in and out: the special tokens and the WordPiece tokenizers of a language pair."""
