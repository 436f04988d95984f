"""`ModelConfig`: the network's hyperparameters (paper names)."""

from __future__ import annotations

import dataclasses
import json

from tf_transformer.config.base import _check_unit_interval, _DictConfig, setting
from tf_transformer.errors import InvalidValueError


@dataclasses.dataclass(frozen=True)
class ModelConfig(_DictConfig):
    """Hyperparameters of the encoder-decoder Transformer (paper names throughout).

    Defaults are the paper's base model ("Attention Is All You Need", Table 3).
    """

    num_layers: int = setting(6, "N: encoder layers (and as many decoder layers).", positive=True)
    d_model: int = setting(512, "Model width.", positive=True)
    num_heads: int = setting(
        8, "h: attention heads; each is d_model / num_heads wide.", positive=True
    )
    dff: int = setting(
        2048, "Inner width of the position-wise feed-forward network.", positive=True
    )
    dropout_rate: float = setting(0.1, "P_drop: dropout on sublayer outputs and embeddings.")
    # Regularizers for small corpora (Sennrich & Zhang 2019; Araabi & Monz 2020), 0 = off:
    attention_dropout: float = setting(
        0.0, "Dropout on the attention weights, after the softmax (0: off).", metavar="P"
    )
    activation_dropout: float = setting(
        0.0, "Dropout on the feed-forward activations (0: off).", metavar="P"
    )
    word_dropout: float = setting(
        0.0,
        "In training, zero a whole word embedding (source and target) with probability P (0: off).",
        metavar="P",
    )
    activation: str = setting(
        "relu",
        "Feed-forward activation: relu (the paper's) or gelu.",
        choices=("relu", "gelu"),
    )
    # Training sets the vocabulary sizes from its tokenizers.
    input_vocab_size: int = setting(8000, "Source vocabulary size (set by training).")
    target_vocab_size: int = setting(8000, "Target vocabulary size (set by training).")
    max_length: int = setting(512, "Longest sequence the positional table covers.", positive=True)
    norm_first: bool = setting(
        False, "Pre-norm (LayerNorm before each sublayer) instead of the paper's post-norm."
    )
    positional_layout: str = setting(
        "interleaved",
        "Sinusoid layout: interleaved (the paper's) or concat (the tutorial's).",
        choices=("interleaved", "concat"),
    )
    share_target_embeddings: bool = setting(
        False, "Tie the output projection to the target embeddings."
    )
    # Three-way tying (Press & Wolf 2017): implies share_target_embeddings.
    share_embeddings: bool = setting(
        False,
        "One matrix for source and target embeddings and the output projection (needs "
        "shared_vocab: input and target vocabularies the same).",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.d_model % self.num_heads:
            raise InvalidValueError(
                f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})."
            )
        _check_unit_interval(
            self, ("dropout_rate", "attention_dropout", "activation_dropout", "word_dropout")
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)
