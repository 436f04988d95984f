"""From batches to checkpoints: the training run, the custom loop, `model.fit`, and their parts.

`run` is the entry point (data, tokenizers, batches, resume, then the loop or `fit`):

    >>> from tf_transformer import training
    >>> result = training.run("runs/sample", DataConfig("sample"), get_preset("tiny"),
    ...                       get_train_preset("tiny"))
"""

from tf_transformer.training.loop import NonFiniteLossError, TrainResult
from tf_transformer.training.start.entry import run

__all__ = ["NonFiniteLossError", "TrainResult", "run"]
