"""Training that goes on from an adapter (`DistillConfig.init_adapter`): a GGUF LoRA file reads back as the
PEFT tensors it was written from (`ark.distill.gguf_adapter.read_gguf_lora`), and an adapter whose rank or
alpha is not the run's, or that is not an adapter at all, is refused in one line when the settings are made.
Training from one, on the real student, is in test_train_cpu.py."""

from __future__ import annotations

import numpy as np
import pytest

from ark.distill.gguf_adapter import read_base, read_gguf_lora, write_gguf_lora
from ark.distill.student import smollm2_gguf_path
from ark.distill.train import DistillConfig
from tests.distill.test_gguf_adapter import _other_arch_gguf, _tiny_adapter

pytestmark = pytest.mark.distill


def _random_adapter(folder, rank: int = 2):
    """A rank-`rank` adapter on q, k and up projections of two layers, seeded random values (SmolLM2's shapes)."""
    base = read_base(smollm2_gguf_path())
    rng = np.random.default_rng(0)
    tensors = {}
    for layer in (2, 29):
        for module, gguf in (("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"), ("mlp.up_proj", "ffn_up")):
            n_in, n_out = base.tensor_shapes[f"blk.{layer}.{gguf}.weight"]
            key = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{key}.lora_A.weight"] = rng.standard_normal((rank, n_in)).astype(np.float32)
            tensors[f"{key}.lora_B.weight"] = rng.standard_normal((n_out, rank)).astype(np.float32)
    return _tiny_adapter(folder, tensors, r=rank), tensors, base


def test_a_gguf_adapter_reads_back_as_the_peft_tensors_it_was_written_from(tmp_path):
    folder, tensors, base = _random_adapter(tmp_path / "a")
    alpha, back = read_gguf_lora(write_gguf_lora(folder, tmp_path / "a.gguf", dtype="f32"), base.n_head, base.n_head_kv)
    assert alpha == 4.0 and set(back) == set(tensors)
    for key, value in tensors.items():
        np.testing.assert_array_equal(back[key], value, err_msg=key)
    # in F16 (the shipped adapters' precision) the same, to F16's rounding
    alpha, half = read_gguf_lora(write_gguf_lora(folder, tmp_path / "h.gguf"), base.n_head, base.n_head_kv)
    for key, value in tensors.items():
        np.testing.assert_allclose(half[key], value, rtol=1e-3, atol=1e-3, err_msg=key)


def test_the_rank_and_alpha_of_an_adapter_are_checked_against_the_run(tmp_path):
    folder, _, _ = _random_adapter(tmp_path / "a")
    gguf = write_gguf_lora(folder, tmp_path / "a.gguf")
    for path in (folder, gguf):
        assert DistillConfig(init_adapter=path, lora_r=2, lora_alpha=4).init_adapter == path
        with pytest.raises(ValueError) as err:
            DistillConfig(init_adapter=path, lora_r=16, lora_alpha=32)
        assert "has LoRA r 2, alpha 4; this run trains r 16, alpha 32" in str(err.value)
        assert "\n" not in str(err.value)


NOT_ADAPTERS = {
    "missing": (lambda d: d / "nowhere.gguf", "is neither a PEFT adapter folder nor an existing .gguf file"),
    "other file": (lambda d: (d / "notes.txt").write_text("x") and d / "notes.txt",
                   "is neither a PEFT adapter folder nor an existing .gguf file"),
    "empty folder": (lambda d: (d / "e").mkdir() or d / "e", "is not a PEFT adapter folder"),
    "a model, not an adapter": (lambda d: _other_arch_gguf(d / "m.gguf"), "is not a GGUF LoRA adapter"),
}


@pytest.mark.parametrize("case", list(NOT_ADAPTERS))
def test_what_is_not_an_adapter_is_refused_in_one_line(case, tmp_path):
    make, message = NOT_ADAPTERS[case]
    path = make(tmp_path)
    with pytest.raises(ValueError) as err:
        DistillConfig(init_adapter=path)
    assert message in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)
    if path.suffix == ".gguf" and path.is_file():
        with pytest.raises(ValueError, match="is not a GGUF LoRA adapter"):
            read_gguf_lora(path, 9, 3)
