"""Frozen configuration dataclasses: every setting once, with its help text.

- `ModelConfig`: the network (paper names); `max_length` is the positional table, the longest
  sequence the model can take.
- `TrainConfig`: optimizer, batching and loop; `max_tokens` caps each training sentence.
- `DecodeConfig`: the decoding defaults of the Translator, the export and the CLI;
  `max_source_tokens` caps each source sentence, `max_new_tokens` the tokens generated.
- `DataConfig`: which corpus and which language pair.
- `PRESETS` / `TRAIN_PRESETS`: named model and training configurations.

Each field's metadata holds its `help`, and the hints of `setting`: the CLI's flags are made
from the fields (`tf_transformer.commands.flags`).
"""

from tf_transformer.config.base import setting
from tf_transformer.config.data import NAMED_DATASETS, DataConfig
from tf_transformer.config.decode import DecodeConfig
from tf_transformer.config.model import ModelConfig
from tf_transformer.config.presets import PRESETS, TRAIN_PRESETS, get_preset, get_train_preset
from tf_transformer.config.train import TrainConfig

__all__ = [
    "NAMED_DATASETS",
    "PRESETS",
    "TRAIN_PRESETS",
    "DataConfig",
    "DecodeConfig",
    "ModelConfig",
    "TrainConfig",
    "get_preset",
    "get_train_preset",
    "setting",
]
