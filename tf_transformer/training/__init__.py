"""From batches to checkpoints: the training run, the custom loop, `model.fit`, and their parts.

- `start/`: the way in, `run` (data, tokenizers, batches, resume, the run lock);
- `session`: one call of the custom loop (`loop`) or of `model.fit` (`fit/`);
- `step/`: what a step computes (train step, losses, schedule, mixed precision);
- `policies/`: the callbacks both run (stop rules, checkpoints, validation, averaging);
- `validation` (dev BLEU) and `best_checkpoint`, `logs`, `checkpoints`, `distribute`, `result`
  (`TrainResult`, `StopReason`).

`run` is the entry point (data, tokenizers, batches, resume, then the loop or `fit`):

    >>> from tf_transformer import training
    >>> result = training.run("runs/sample", DataConfig("sample"), get_preset("tiny"),
    ...                       get_train_preset("tiny"))
"""

from tf_transformer.training.policies.standard import NonFiniteLossError
from tf_transformer.training.result import StopReason, TrainResult
from tf_transformer.training.start.entry import run

__all__ = ["NonFiniteLossError", "StopReason", "TrainResult", "run"]
