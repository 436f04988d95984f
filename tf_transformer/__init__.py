"""tf_transformer: the original encoder-decoder Transformer in TensorFlow 2 / Keras 3."""

__version__ = "0.1.0"
