"""TensorBoard events come from TensorBoard's own `tf.summary` API and read back in TensorBoard."""

import tensorflow as tf
from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

from tf_transformer.training.fit.model_fit import make_callbacks
from tf_transformer.training.logs import write_scalar


def read_scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    """`{tag: [(step, value), ...]}` of the scalars plugin, as TensorBoard loads the folder."""
    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {
        tag: [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]
        for tag in events.Tags()["tensors"]
        if events.SummaryMetadata(tag).plugin_data.plugin_name == "scalars"
    }


def test_scalars_read_back_in_tensorboard(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        write_scalar("loss", 2.5, step=10)
        write_scalar("loss", 1.25, step=20)
        write_scalar("learning_rate", 1e-3, step=20)
    writer.flush()
    scalars = read_scalars(tmp_path)
    assert scalars["loss"] == [(10, 2.5), (20, 1.25)]
    assert [step for step, _ in scalars["learning_rate"]] == [20]


def test_fit_logs_through_the_keras_tensorboard_callback(tmp_path):
    callbacks = make_callbacks(tmp_path / "run")
    assert any(isinstance(c, tf.keras.callbacks.TensorBoard) for c in callbacks)
