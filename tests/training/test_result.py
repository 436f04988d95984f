"""`StopReason`: why a training call stopped, equal to the strings it replaced."""

import json

from tf_transformer.training.result import StopReason


def test_stop_reasons_equal_print_and_serialise_as_their_strings():
    assert StopReason.MAX_STEPS == "max_steps" and StopReason("another worker") is (
        StopReason.ANOTHER_WORKER
    )
    assert f"stopped by {StopReason.SIGTERM}" == "stopped by SIGTERM"
    assert json.dumps({"stopped_by": StopReason.PATIENCE}) == '{"stopped_by": "patience"}'


def test_only_the_signals_are_stopped_by_a_signal():
    assert {reason for reason in StopReason if reason.by_signal} == {
        StopReason.SIGINT,
        StopReason.SIGTERM,
    }
