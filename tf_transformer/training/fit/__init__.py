"""Training with `model.fit`: the call (`model_fit`), its optimizer and its epoch backup."""

from tf_transformer.moved import moved_name


def __getattr__(name: str):
    # `tf_transformer.training.fit` was one module; its names live in `.model_fit`.
    return moved_name(__name__, name)
