"""The precision a distillation trains in (`DistillConfig.bf16`): true or false as set; "auto" is bfloat16
autocast only where the hardware computes it natively (`ark.distill.train.native_bf16`: a CPU with
AVX512-BF16 or AMX, read from its flags), float32 elsewhere, where PyTorch emulates bfloat16 several times
slower. Any other value is refused in one line."""

from __future__ import annotations

import pytest

from ark.distill.train import DistillConfig, native_bf16, use_bf16

CPUS = {  # the flags line of /proc/cpuinfo, cut short
    "AVX2 only (AMD EPYC of this machine's kind)": ("flags\t\t: fpu sse4_2 avx avx2 fma bmi2", False),
    "AVX512 without BF16": ("flags\t\t: fpu avx2 avx512f avx512bw avx512_vnni", False),
    "AVX512-BF16": ("flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni", True),
    "AMX": ("flags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8", True),
}


@pytest.mark.parametrize("cpu", list(CPUS))
def test_auto_trains_in_bfloat16_only_on_a_cpu_that_has_it(cpu, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # the CPU's case, on any machine
    flags, native = CPUS[cpu]
    (tmp_path / "cpuinfo").write_text(f"processor\t: 0\n{flags}\n\nprocessor\t: 1\n{flags}\n")
    assert native_bf16(tmp_path / "cpuinfo") is native
    assert use_bf16(DistillConfig(bf16="auto"), tmp_path / "cpuinfo") is native
    # an explicit setting is kept whatever the CPU
    assert use_bf16(DistillConfig(bf16=True), tmp_path / "cpuinfo") is True
    assert use_bf16(DistillConfig(bf16=False), tmp_path / "cpuinfo") is False


def test_no_cpuinfo_means_float32(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert native_bf16(tmp_path / "missing") is False


@pytest.mark.parametrize("value", ["yes", "bf16", 1, None])
def test_another_value_is_refused_in_one_line(value):
    with pytest.raises(ValueError) as err:
        DistillConfig(bf16=value)
    assert str(err.value) == f"bf16={value!r} is not valid; choose true, false or auto"
