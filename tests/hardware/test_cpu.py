"""The CPU's features from /proc/cpuinfo texts, and the ISA limits of ONEDNN_MAX_CPU_ISA and
XLA_FLAGS' --xla_cpu_max_isa."""

import pytest

from tf_transformer.hardware.cpu import CpuFeatures, cpu_features, isa_limit, parse_cpuinfo

BASE_FLAGS = "fpu sse4_1 avx avx2 fma"


def cpuinfo(model: str, flags: str, processors: int = 2) -> str:
    """A /proc/cpuinfo text: `processors` entries of one model with `flags`."""
    entry = (
        "processor\t: {n}\nvendor_id\t: X\nmodel name\t: {model}\ncpu cores\t: {cores}\n"
        "flags\t\t: {flags}\n\n"
    )
    return "".join(
        entry.format(n=n, model=model, cores=processors, flags=flags) for n in range(processors)
    )


EPYC_AVX2 = cpuinfo("AMD EPYC 7B12", BASE_FLAGS)
EPYC_BF16 = cpuinfo("AMD EPYC", f"{BASE_FLAGS} avx512f avx512bw avx512_bf16")
XEON_AMX = cpuinfo(
    "Intel(R) Xeon(R) Platinum 8481C",
    f"{BASE_FLAGS} avx512f avx512_bf16 amx_bf16 amx_tile amx_int8",
    processors=4,
)


@pytest.fixture(autouse=True)
def no_isa_limit(monkeypatch):
    """Each test sets the limit it means (the machine's environment may hold one)."""
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)


def test_an_avx2_only_cpu_has_no_native_bfloat16():
    cpu = parse_cpuinfo(EPYC_AVX2)
    assert (cpu.model, cpu.cores) == ("AMD EPYC 7B12", 2)
    assert cpu.has("avx2") and not cpu.has("avx512f") and not cpu.native_bfloat16
    assert cpu.describe() == (
        "cpu: AMD EPYC 7B12, 2 cores, avx2=yes avx512f=no avx512_bf16=no amx=no"
    )


def test_avx512_bf16_is_native_bfloat16():
    cpu = parse_cpuinfo(EPYC_BF16)
    assert cpu.native_bfloat16 and not cpu.has("amx")
    assert cpu.describe() == "cpu: AMD EPYC, 2 cores, avx2=yes avx512f=yes avx512_bf16=yes amx=no"
    assert cpu.to_dict() == {
        "model": "AMD EPYC",
        "cores": 2,
        "avx2": True,
        "avx512f": True,
        "avx512_bf16": True,
        "amx": False,
        "limited": [],
        "isa_limit": None,
        "xla_limit": None,
    }


def test_amx_bf16_with_its_tiles_is_amx():
    cpu = parse_cpuinfo(XEON_AMX)
    assert cpu.cores == 4 and cpu.has("amx_bf16") and cpu.has("amx") and cpu.native_bfloat16
    assert cpu.describe().endswith("avx512_bf16=yes amx=yes")
    # AMX-BF16 alone makes bfloat16 native (a CPU without AVX512_BF16 in its flags).
    amx_only = parse_cpuinfo(cpuinfo("X", f"{BASE_FLAGS} avx512f amx_bf16 amx_tile"))
    assert not amx_only.has("avx512_bf16") and amx_only.native_bfloat16
    # Tiles without their bfloat16 instructions are not.
    assert not parse_cpuinfo(cpuinfo("X", f"{BASE_FLAGS} avx512f amx_tile")).native_bfloat16


@pytest.mark.parametrize("limit", ["AVX2", "avx2_vnni", "Avx", "SSE41", "AVX512_CORE_VNNI"])
def test_an_isa_limit_below_avx512_bf16_hides_it(monkeypatch, limit):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", limit)
    cpu = parse_cpuinfo(XEON_AMX)
    assert not cpu.has("avx512_bf16") and not cpu.has("amx") and not cpu.native_bfloat16
    assert cpu.limited("avx512_bf16") and cpu.limited("amx")
    said = f"(limited by ONEDNN_MAX_CPU_ISA={limit.upper()})"
    assert f"avx512_bf16=no {said}" in cpu.describe()
    assert f"amx=no {said}" in cpu.describe()
    record = cpu.to_dict()
    assert record["avx512_bf16"] is False and record["isa_limit"] == limit.upper()
    assert {"avx512_bf16", "amx"} <= set(record["limited"])
    # avx512f stays within an AVX-512 limit only.
    assert cpu.has("avx512f") == limit.upper().startswith("AVX512")


def test_a_limit_hides_only_what_the_cpu_has(monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    cpu = parse_cpuinfo(EPYC_AVX2)
    assert not cpu.limited("avx512_bf16") and cpu.has("avx2")
    assert "limited" not in cpu.describe()


@pytest.mark.parametrize(
    "limit, bf16, amx",
    [("AVX512_CORE_BF16", True, False), ("AVX512_CORE_AMX", True, True), ("DEFAULT", True, True)],
)
def test_limits_at_or_above_bfloat16_keep_it(monkeypatch, limit, bf16, amx):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", limit)
    cpu = parse_cpuinfo(XEON_AMX)
    assert (cpu.has("avx512_bf16"), cpu.has("amx"), cpu.native_bfloat16) == (bf16, amx, True)


def test_the_older_variable_counts_and_the_newer_wins():
    assert isa_limit({"DNNL_MAX_CPU_ISA": "avx2"}) == ("AVX2", "DNNL_MAX_CPU_ISA")
    both = {"DNNL_MAX_CPU_ISA": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}
    assert isa_limit(both) == ("AVX512_CORE_BF16", "ONEDNN_MAX_CPU_ISA")
    assert isa_limit({})[0] is None and isa_limit({"ONEDNN_MAX_CPU_ISA": " "})[0] is None
    limited = parse_cpuinfo(EPYC_BF16, environ={"DNNL_MAX_CPU_ISA": "AVX2"})
    assert "avx512_bf16=no (limited by DNNL_MAX_CPU_ISA=AVX2)" in limited.describe()


def test_arm_features_and_an_empty_text_fall_back():
    arm = parse_cpuinfo("processor\t: 0\nFeatures\t: fp asimd bf16\n\nprocessor\t: 1\n")
    assert arm.cores == 2 and "asimd" in arm.flags and not arm.native_bfloat16
    empty = parse_cpuinfo("")  # not Linux: the model and cores from platform and os
    assert empty.cores >= 1 and empty.model and empty.flags == frozenset()
    assert empty.describe().endswith("avx2=no avx512f=no avx512_bf16=no amx=no")


def test_this_machine_is_described_in_one_line():
    cpu = cpu_features()
    assert isinstance(cpu, CpuFeatures) and cpu.cores >= 1
    line = cpu.describe()
    assert line.startswith(f"cpu: {cpu.model}, {cpu.cores} cores, avx2=") and "\n" not in line


@pytest.mark.parametrize(
    "text, flags",
    [
        (EPYC_BF16, ""),
        (EPYC_BF16, "--xla_cpu_max_isa=AVX2"),
        (EPYC_BF16, "--xla_dump_to=/tmp/x --xla_cpu_max_isa=avx"),
        (EPYC_AVX2, "--xla_cpu_max_isa=AVX512"),
    ],
)
def test_the_description_reports_xla_flags_isa_limit(text, flags):
    cpu = parse_cpuinfo(text, environ={"XLA_FLAGS": flags})
    assert cpu.has("avx512f") is ("avx512f" in text)  # oneDNN's view is XLA's limit's business
    limited = "--xla_cpu_max_isa" in flags
    assert ("(XLA limited to " in cpu.describe()) is limited
    assert cpu.to_dict()["xla_limit"] == (flags.rsplit("=", 1)[1].upper() if limited else None)
