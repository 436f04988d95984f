"""tf_transformer: the original encoder-decoder Transformer in TensorFlow 2 / Keras 3."""

__version__ = "0.1.0"

from tf_transformer import moved as _moved

_moved.install()  # the old paths of moved modules keep working (tf_transformer/moved.py)
