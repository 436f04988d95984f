"""How a model's weights are checkpointed: every weight by its path (read by training and serving)."""

from __future__ import annotations

import tensorflow as tf


class ModelWeights(tf.Module):
    """Every weight of a Keras model, tracked by its path without the model's own name.

    `tf.train.Checkpoint(model=model)` alone misses the weights of layers a Keras 3 model
    keeps in Python lists (the encoder and decoder stacks): Keras 3 tracks those lists, TF's
    checkpoint graph does not. Saving this beside the model names every weight explicitly.
    """

    def __init__(self, model: tf.keras.Model):
        super().__init__(name="model_weights")
        self.by_path = {variable.path.split("/", 1)[-1]: variable for variable in model.weights}


def model_checkpoint(model: tf.keras.Model, **others) -> tf.train.Checkpoint:
    """A `tf.train.Checkpoint` of `model` (all its weights, see `ModelWeights`) and `others`."""
    return tf.train.Checkpoint(model=model, model_weights=ModelWeights(model), **others)
