"""What `mixed_precision="auto"` resolves to, given the CPU and the GPUs (passed in: the answer
must not depend on the machine that runs the tests), and that set values are kept."""

import pytest
import tensorflow as tf

from tf_transformer.config import TrainConfig
from tf_transformer.hardware.cpu import CpuFeatures
from tf_transformer.training.step.build import build_model
from tf_transformer.training.step.mixed_precision import (
    Precision,
    policy_name,
    resolve_mixed_precision,
)
from tf_transformer.training.step.schedule import make_optimizer

AVX2 = frozenset({"avx", "avx2", "fma"})
BF16 = AVX2 | {"avx512f", "avx512_bf16"}
AMX = AVX2 | {"avx512f", "amx_bf16", "amx_tile"}


def cpu(flags, limit=None) -> CpuFeatures:
    return CpuFeatures(model="test CPU", cores=2, flags=flags, isa_limit=limit)


@pytest.mark.parametrize(
    "flags, reason",
    [
        (BF16, "auto: the CPU has avx512_bf16"),
        (AMX, "auto: the CPU has amx-bf16"),
        (BF16 | AMX, "auto: the CPU has avx512_bf16 and amx-bf16"),
    ],
)
def test_auto_is_bfloat16_where_the_cpu_has_it_natively(flags, reason):
    chosen = resolve_mixed_precision("auto", cpu=cpu(flags), gpus=[])
    assert chosen == Precision("bfloat16", reason, auto=True)
    assert chosen.line() == f"mixed precision: bfloat16 ({reason})"


def test_auto_is_float32_where_bfloat16_would_be_emulated():
    chosen = resolve_mixed_precision("auto", cpu=cpu(AVX2), gpus=[])
    reason = "auto: no native bfloat16 on this CPU: avx512_bf16 and amx-bf16 absent"
    assert chosen == Precision(None, reason, auto=True)
    assert chosen.line() == f"mixed precision: float32 ({reason})"
    assert chosen.record() == {"auto": True, "chosen": "float32", "reason": reason}


def test_auto_follows_the_isa_limit():
    limited = resolve_mixed_precision("auto", cpu=cpu(BF16 | AMX, limit="AVX2"), gpus=[])
    assert limited.value is None
    assert limited.reason == (
        "auto: no native bfloat16 on this CPU: avx512_bf16 and amx-bf16 limited by "
        "ONEDNN_MAX_CPU_ISA=AVX2"
    )
    # A limit between the two keeps AVX512_BF16 and hides AMX.
    between = resolve_mixed_precision("auto", cpu=cpu(AMX, limit="AVX512_CORE_BF16"), gpus=[])
    assert between.reason == (
        "auto: no native bfloat16 on this CPU: avx512_bf16 absent, amx-bf16 limited by "
        "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16"
    )


def test_auto_is_bfloat16_with_a_gpu_whatever_the_cpu():
    chosen = resolve_mixed_precision("auto", cpu=cpu(AVX2), gpus=["/physical_device:GPU:0"])
    assert chosen == Precision("bfloat16", "auto: a GPU is visible", auto=True)


@pytest.mark.parametrize("value", [None, "float16", "bfloat16"])
def test_a_set_value_is_kept_on_any_machine(value):
    for features in (AVX2, BF16):
        chosen = resolve_mixed_precision(value, cpu=cpu(features), gpus=[])
        assert chosen == Precision(value, "as configured", auto=False)
        assert chosen.record()["auto"] is False


def test_an_unknown_value_is_refused():
    with pytest.raises(ValueError, match="'float8'"):
        resolve_mixed_precision("float8")
    with pytest.raises(ValueError, match="mixed_precision must be one of"):
        TrainConfig(mixed_precision="float8")
    assert TrainConfig(mixed_precision="auto").mixed_precision == "auto"


def test_a_record_says_whether_auto_chose_the_value():
    record = Precision("bfloat16", "auto: the CPU has avx512_bf16", auto=True).record()
    assert Precision.chosen_by_auto(record, "bfloat16")
    assert not Precision.chosen_by_auto(record, None)  # the value changed since
    assert not Precision.chosen_by_auto(None, "bfloat16")  # a run written before "auto"
    configured = Precision(None, "as configured").record()
    assert not Precision.chosen_by_auto(configured, None)
    float32 = Precision(None, "auto: no native bfloat16 on this CPU: ...", auto=True).record()
    assert Precision.chosen_by_auto(float32, None)


def test_policy_and_optimizer_resolve_auto_like_a_run():
    # On this machine, whatever it is: the one resolution decides the policy, and "auto" never
    # picks float16, so never a loss-scaled optimizer.
    expected = resolve_mixed_precision("auto")
    assert policy_name("auto") == policy_name(expected.value)
    assert policy_name(None) == "float32" and policy_name("bfloat16") == "mixed_bfloat16"
    optimizer = make_optimizer(16, TrainConfig(mixed_precision="auto"))
    assert not isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    assert isinstance(
        make_optimizer(16, TrainConfig(mixed_precision="float16")),
        tf.keras.mixed_precision.LossScaleOptimizer,
    )


def test_build_model_resolves_auto():
    from tf_transformer.config import get_preset

    config = get_preset("tiny").replace(input_vocab_size=20, target_vocab_size=20)
    model = build_model(config, "auto")
    assert model.dtype_policy.name == policy_name(resolve_mixed_precision("auto").value)
    assert tf.keras.mixed_precision.global_policy().name == "float32"  # restored
