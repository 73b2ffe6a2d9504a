"""A PEFT LoRA adapter as a GGUF LoRA file that llama.cpp applies to the student's base GGUF.

Training (`ark.distill.train`) saves a PEFT adapter folder (adapter_config.json +
adapter_model.safetensors) for the transformers model that was de-quantized from a GGUF file. Serving
goes through llama.cpp (`ark.llm.local_server`), which loads the quantized base GGUF and applies a GGUF
LoRA adapter on top at load time (`Llama(model_path=..., lora_path=...)`, server flag `--lora_path`).

    from ark.distill.gguf_adapter import write_gguf_lora
    path = write_gguf_lora("results/distill/student/adapter", "results/distill/student/adapter.gguf")
    Llama(model_path=str(smollm2_gguf_path()), lora_path=str(path))         # llama_cpp
    LocalServer(extra_args=("--lora_path", str(path)))                      # ark.llm.local_server

What llama.cpp expects of the file, and how a PEFT adapter gets there:

- metadata: general.type "adapter", adapter.type "lora", adapter.lora.alpha, and the base's
  general.architecture (llama.cpp refuses an adapter whose architecture differs from its model's);
- names: `base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight` becomes
  `blk.N.attn_q.weight.lora_a` (k/v/o_proj -> attn_k/attn_v/attn_output, mlp gate/up/down_proj ->
  ffn_gate/ffn_up/ffn_down), lora_B the same with `.lora_b`;
- shapes: PEFT's lora_A is (r, in) and lora_B is (out, r) in numpy order; GGUF stores dimensions the
  other way round, so they are written as they are and llama.cpp finds lora_a's ne = [in, r] and
  lora_b's ne = [r, out] against its weight's ne = [in, out], the orientation it checks;
- rotary layout: a llama GGUF stores the rows of attn_q and attn_k permuted within each head (the two
  rotary halves interleaved; transformers undoes that when it de-quantizes), so q_proj's lora_b gets the
  same row permutation with the base's head count and k_proj's with its key-value head count; lora_a
  acts on the input side, which is not permuted;
- scale: PEFT multiplies B·A by lora_alpha / r, llama.cpp by adapter.lora.alpha / rank, where rank is
  the lora_b's first GGUF dimension, i.e. r of that module: writing lora_alpha gives the same scale
  (also under a rank_pattern). rsLoRA (alpha / sqrt(r)), DoRA, per-module alpha and trained biases have
  no llama.cpp counterpart and are refused.

Tensors are written as F16 by default: rank 16 on every linear layer of SmolLM2-135M is 9.8 MB in F16
against 19.5 MB in F32 (`dtype="f32"` keeps full precision).

`read_gguf_lora` goes the other way, so that training can go on from a shipped GGUF adapter
(`DistillConfig.init_adapter`): the PEFT tensors and alpha back, the q/k rows of lora_b un-permuted.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ark import atomic

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# Base architectures whose GGUF layout this writer knows (tensor names and the q/k row permutation).
ARCHITECTURES = ("llama",)
# PEFT module under model.layers.N (parent.leaf) -> the GGUF tensor of block N.
MODULE_TENSORS = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
DTYPES = {"f16": np.float16, "f32": np.float32}

_PEFT_KEY = re.compile(r"^base_model\.model\.model\.layers\.(\d+)\.(\w+\.\w+)\.lora_([AB])\.weight$")


@dataclass(frozen=True)
class BaseModel:
    """What the adapter must agree with in the base GGUF."""

    arch: str
    n_head: int
    n_head_kv: int
    tensor_shapes: dict[str, tuple[int, ...]]  # GGUF name -> ne (GGUF order: input dimension first)


def read_base(base_gguf: Path | str) -> BaseModel:
    """Architecture, head counts and tensor shapes of a base GGUF file."""
    path = Path(base_gguf)
    if not path.is_file():
        raise ValueError(f"base GGUF {str(path)!r} does not exist")
    stat = path.stat()
    return _read_base(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _read_base(path_str: str, mtime_ns: int, size: int) -> BaseModel:
    """`read_base` of one version of a file (parsing a GGUF's vocabulary takes seconds: read it once)."""
    from gguf import GGUFReader

    path = Path(path_str)
    reader = GGUFReader(path)

    def value(key: str):
        field = reader.get_field(key)
        return None if field is None else field.contents()

    arch = value("general.architecture")
    if arch not in ARCHITECTURES:
        raise ValueError(f"base GGUF {path.name} has general.architecture={arch!r}; "
                         f"supported: {list(ARCHITECTURES)}")
    n_head, n_head_kv = value(f"{arch}.attention.head_count"), value(f"{arch}.attention.head_count_kv")
    if n_head is None:
        raise ValueError(f"base GGUF {path.name} has no {arch}.attention.head_count")
    shapes = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}
    return BaseModel(arch, int(n_head), int(n_head if n_head_kv is None else n_head_kv), shapes)


def read_peft_adapter(adapter_dir: Path | str) -> tuple[dict, dict[str, np.ndarray]]:
    """(adapter_config, {safetensors key: float32 array}) of a PEFT adapter folder (any float dtype,
    bfloat16 included, which numpy cannot read: hence torch)."""
    from safetensors.torch import load_file

    folder = Path(adapter_dir)
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        if not (folder / name).is_file():
            raise ValueError(f"{str(folder)!r} is not a PEFT adapter folder: {name} is missing")
    config = json.loads((folder / ADAPTER_CONFIG).read_text())
    weights = load_file(str(folder / ADAPTER_WEIGHTS))
    return config, {k: v.float().numpy() for k, v in weights.items()}


def check_lora_config(config: dict) -> None:
    """Raise ValueError (one line) for a PEFT setting llama.cpp's LoRA cannot reproduce."""
    if config.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"peft_type={config.get('peft_type')!r} is not a LoRA adapter; only 'LORA' converts")
    if config.get("use_rslora"):
        raise ValueError("use_rslora=true is not supported: llama.cpp scales LoRA by alpha/r, "
                         "rsLoRA by alpha/sqrt(r); train with use_rslora=false")
    if config.get("use_dora"):
        raise ValueError("use_dora=true is not supported: llama.cpp has no DoRA magnitude vectors")
    if config.get("alpha_pattern"):
        raise ValueError(f"alpha_pattern={config['alpha_pattern']!r} is not supported: llama.cpp has one alpha "
                         "per adapter")
    if config.get("bias", "none") != "none":
        raise ValueError(f"bias={config['bias']!r} is not supported (llama.cpp applies no trained biases); "
                         "use bias='none'")
    alpha = config.get("lora_alpha")
    if not isinstance(alpha, (int, float)) or alpha <= 0:
        raise ValueError(f"lora_alpha={alpha!r} is not valid; need a number > 0")


def gguf_pairs(weights: dict[str, np.ndarray], base: BaseModel) -> dict[str, dict[str, np.ndarray]]:
    """GGUF base tensor name -> {"a": lora_A, "b": lora_B} (PEFT orientation), checked against the base."""
    pairs: dict[str, dict[str, np.ndarray]] = {}
    unmapped = []
    for key, array in weights.items():
        m = _PEFT_KEY.match(key)
        if m is None or m.group(2) not in MODULE_TENSORS:
            unmapped.append(key)
            continue
        name = f"blk.{int(m.group(1))}.{MODULE_TENSORS[m.group(2)]}.weight"
        pairs.setdefault(name, {})[m.group(3).lower()] = array
    if unmapped:
        raise ValueError(f"cannot map {len(unmapped)} adapter tensors to GGUF (e.g. {unmapped[0]!r}); "
                         f"supported modules: {sorted(MODULE_TENSORS)} under model.layers.N")
    if not pairs:
        raise ValueError("the adapter has no LoRA tensors")
    for name, pair in pairs.items():
        if set(pair) != {"a", "b"}:
            missing = "lora_B" if "a" in pair else "lora_A"
            raise ValueError(f"{name}: the adapter has no {missing} for it")
        if name not in base.tensor_shapes:
            raise ValueError(f"{name} does not exist in the base GGUF (adapter trained on another model?)")
        n_in, n_out = base.tensor_shapes[name]
        a, b = pair["a"], pair["b"]
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != n_in or b.shape[0] != n_out or a.shape[0] != b.shape[1]:
            raise ValueError(f"{name}: lora_A {a.shape} / lora_B {b.shape} do not fit the base weight "
                             f"(out {n_out}, in {n_in}); adapter trained on another model?")
    return pairs


def rotary_permute(rows: np.ndarray, n_head: int) -> np.ndarray:
    """Reorder the output rows of a q or k projection from the Hugging Face layout to llama GGUF's.

    Within each head, HF keeps the two rotary halves as [first half | second half]; a llama GGUF
    interleaves them (row 2i is HF's row i, row 2i+1 is HF's row half + i)."""
    out = rows.shape[0]
    if out % (2 * n_head):
        raise ValueError(f"{out} rows do not split into {n_head} heads of rotary pairs")
    return rows.reshape(n_head, 2, out // n_head // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def rotary_unpermute(rows: np.ndarray, n_head: int) -> np.ndarray:
    """The inverse of `rotary_permute`: llama GGUF's row order of a q or k projection back to Hugging Face's."""
    out = rows.shape[0]
    if out % (2 * n_head):
        raise ValueError(f"{out} rows do not split into {n_head} heads of rotary pairs")
    return rows.reshape(n_head, out // n_head // 2, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def _lora_reader(file: Path):
    """(GGUFReader, lora alpha) of a GGUF LoRA adapter; ValueError (one line) for any other file."""
    from gguf import GGUFReader, Keys

    if file.suffix != ".gguf" or not file.is_file():
        raise ValueError(f"{str(file)!r} is neither a PEFT adapter folder nor an existing .gguf file")
    reader = GGUFReader(file)
    kind = reader.get_field(Keys.Adapter.TYPE)
    alpha = reader.get_field(Keys.Adapter.LORA_ALPHA)
    if kind is None or kind.contents() != "lora" or alpha is None:
        raise ValueError(f"{str(file)!r} is not a GGUF LoRA adapter (no adapter.type 'lora' with an adapter.lora.alpha)")
    return reader, float(alpha.contents())


def lora_rank_alpha(path: Path | str) -> tuple[int, float]:
    """The LoRA rank and alpha of an adapter: a PEFT folder (its adapter_config.json) or a GGUF LoRA file
    (the first dimension of its lora_b tensors, one for all, and adapter.lora.alpha). ValueError (one line)
    for anything else."""
    path = Path(path)
    if path.is_dir():
        missing = [name for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS) if not (path / name).is_file()]
        if missing:
            raise ValueError(f"{str(path)!r} is not a PEFT adapter folder ({missing[0]} is missing) nor a .gguf file")
        config = json.loads((path / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        return int(config.get("r", 0)), float(config.get("lora_alpha", 0))
    reader, alpha = _lora_reader(path)
    ranks = {int(t.shape[0]) for t in reader.tensors if t.name.endswith(".lora_b")}   # ne: [r, out]
    if len(ranks) != 1:
        raise ValueError(f"{str(path)!r} is not a GGUF LoRA adapter of one rank (ranks {sorted(ranks)})")
    return ranks.pop(), alpha


def read_gguf_lora(path: Path | str, n_head: int, n_head_kv: int) -> tuple[float, dict[str, np.ndarray]]:
    """(lora_alpha, {PEFT safetensors key: float32 array}) of a GGUF LoRA adapter for a llama model of
    `n_head` query and `n_head_kv` key-value heads: the inverse of `write_gguf_lora`."""
    file = Path(path)
    reader, alpha = _lora_reader(file)
    modules = {tensor: module for module, tensor in MODULE_TENSORS.items()}
    weights: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        m = re.match(r"^blk\.(\d+)\.(\w+)\.weight\.lora_([ab])$", t.name)
        if m is None or m.group(2) not in modules:
            raise ValueError(f"{file.name}: tensor {t.name!r} is not a LoRA tensor of a llama block; "
                             f"known: blk.N.<{'|'.join(sorted(modules))}>.weight.lora_a/b")
        array = np.array(t.data, dtype=np.float32).reshape(tuple(int(d) for d in reversed(t.shape)))
        if m.group(3) == "b" and m.group(2) in ("attn_q", "attn_k"):
            array = rotary_unpermute(array, n_head if m.group(2) == "attn_q" else n_head_kv)
        weights[f"base_model.model.model.layers.{int(m.group(1))}.{modules[m.group(2)]}.lora_{m.group(3).upper()}.weight"] = array
    if not weights:
        raise ValueError(f"{file.name} holds no LoRA tensors")
    return alpha, weights


def write_gguf_lora(adapter_dir: Path | str, out_path: Path | str, base_gguf: Path | str | None = None,
                    dtype: str = "f16") -> Path:
    """Convert the PEFT LoRA adapter in `adapter_dir` to a GGUF LoRA file at `out_path` for `base_gguf`
    (default: the SmolLM2-135M-Instruct GGUF of `ark.distill.student`). Returns `out_path`.

    Everything is checked before the file is written; bad input raises ValueError with one line."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not valid; choose one of {list(DTYPES)}")
    if base_gguf is None:
        from ark.distill.student import smollm2_gguf_path

        base_gguf = smollm2_gguf_path()
    config, weights = read_peft_adapter(adapter_dir)
    check_lora_config(config)
    base = read_base(base_gguf)
    pairs = gguf_pairs(weights, base)

    tensors: list[tuple[str, np.ndarray]] = []
    for name in sorted(pairs, key=_block_order):
        a, b = pairs[name]["a"], pairs[name]["b"]
        if ".attn_q." in name:
            b = rotary_permute(b, base.n_head)
        elif ".attn_k." in name:
            b = rotary_permute(b, base.n_head_kv)
        for suffix, array in (("lora_a", a), ("lora_b", b)):
            cast = np.ascontiguousarray(array, dtype=DTYPES[dtype])
            if not np.isfinite(cast).all():
                raise ValueError(f"{name}.{suffix} has values that are not finite in {dtype}; try dtype='f32'")
            tensors.append((f"{name}.{suffix}", cast))

    from gguf import GGUFType, GGUFWriter, Keys

    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(out) as tmp:
        writer = GGUFWriter(tmp, base.arch)
        writer.add_type(GGUFType.ADAPTER)
        writer.add_string(Keys.Adapter.TYPE, "lora")
        writer.add_float32(Keys.Adapter.LORA_ALPHA, float(config["lora_alpha"]))
        for name, array in tensors:
            writer.add_tensor(name, array)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return out


def _block_order(name: str) -> tuple[int, str]:
    return int(name.split(".")[1]), name
