"""SFT data for distillation: teacher trajectories -> tokenized chats with assistant-only labels.

Each trajectory becomes one training example: its `Trajectory.to_chat()` messages (system, user, then per
step the assistant message with its tool calls and one tool message per call) and its tool definitions,
rendered with the student's chat template (`ark.distill.student.training_chat_template`). Labels carry
the token id on assistant-authored tokens only (what the template wraps in `{% generation %}`: the
assistant's text, its tool calls and its end-of-turn token) and -100 on every system, user and tool
token. `labelled_spans` decodes what carries labels and `inference_targets` renders, prefix by prefix,
what the model is asked to produce at inference, so the masking can be checked on any example.

    from ark.distill.sft_data import load_trajectories, build_examples, dataset_stats
    chats = [t.to_chat() for t in load_trajectories(Path("results/runs/collect/prime/.../trajectories.jsonl"))]
    examples = build_examples(chats, tokenizer, max_length=16384)   # [{"input_ids", "labels"}, ...]
    dataset_stats(examples)   # {"examples", "tokens", "assistant_tokens", "truncated", ...}
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ark.trajectory import Trajectory

_EMPTY_THINK = re.compile(r"\s*(<think>\s*</think>)?\s*")
IGNORE_INDEX = -100  # label of a token that carries no loss (the value torch's cross-entropy skips)


# ---- reading trajectories ------------------------------------------------------------------------

def iter_trajectories(path: Path) -> Iterator[Trajectory]:
    """Trajectories from a `trajectories.jsonl` (one Trajectory.to_json() per line, as collect writes),
    a run directory's `trajectories/` folder (`<query_id>.json`: a list per query), or one such file."""
    from ark.trajectory import Trajectory

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; expected a collection run directory (experiments/collect.py), "
                                "a trajectories.jsonl or a trajectories/<query_id>.json file")
    if path.is_dir():
        sub = path / "trajectories"
        files = sorted((sub if sub.is_dir() else path).glob("*.json"))
        jsonl = path / "trajectories.jsonl"
        if jsonl.is_file():
            yield from iter_trajectories(jsonl)
            return
        if not files:
            raise FileNotFoundError(f"no trajectories.jsonl or trajectories/*.json under {path}")
        for f in files:
            yield from iter_trajectories(f)
        return
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield Trajectory.from_json(json.loads(line))
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    for d in data if isinstance(data, list) else [data]:
        yield Trajectory.from_json(d)


def load_trajectories(*paths: Path) -> list[Trajectory]:
    """All trajectories under the given paths (see `iter_trajectories`), in file order."""
    return [t for p in paths for t in iter_trajectories(p)]


def trainable_chat(traj: Trajectory) -> dict[str, list[dict]] | None:
    """`traj.to_chat()`, or None when it has no assistant turn (nothing to learn from).

    No filtering on outcome: a trajectory that hit T_max or ended in an error still trains on the steps
    it took (label-free imitation keeps the teacher's behaviour as is).
    """
    chat = traj.to_chat()
    if not any(m.get("role") == "assistant" for m in chat["messages"]):
        return None
    return chat


def ends_trajectory(call: dict[str, Any]) -> bool:
    """Whether a tool call (OpenAI form) is a select or a finish, the calls that end a trajectory together."""
    from ark.tools import FINISH, SELECT

    return call["function"]["name"] in (SELECT, FINISH)


def step_of_several_calls(calls: list[dict[str, Any]]) -> bool:
    """Whether one assistant turn's tool calls are several, a select with its finish not counted: a second
    search beside the first, two anchors explored at once, checks."""
    return sum(not ends_trajectory(c) for c in calls) > 1


def several_calls(chat: dict[str, Any]) -> bool:
    """Whether an assistant turn of the chat makes several tool calls (`step_of_several_calls`)."""
    return any(step_of_several_calls(m.get("tool_calls") or [])
               for m in chat["messages"] if m.get("role") == "assistant")


def repeated(chats: list[dict[str, Any]], multi_call_repeats: int) -> list[dict[str, Any]]:
    """The chats, each one with a step of several calls (`several_calls`) `multi_call_repeats` times in a
    row: more weight on the steps a student that learned the teacher's most frequent shape (one call per
    step) does not take. For the demo's SmolLM2 twice did not teach them (docs/benchmarks.md)."""
    return [c for c in chats for _ in range(multi_call_repeats if several_calls(c) else 1)]


# ---- tokenizing with assistant-only labels -------------------------------------------------------

def tokenize_chat(chat: dict[str, Any], tokenizer, render_kwargs: dict[str, Any] | None = None,
                  max_length: int | None = None) -> dict[str, Any]:
    """One chat -> {"input_ids", "labels", "truncated"} with labels on assistant tokens only.

    The tokenizer's chat template must mark assistant output with `{% generation %}` (use
    `student.load_tokenizer`, which installs such a template); a template without markers would yield an
    all-masked example, so that raises. `max_length` truncates the end (keep the start, like TRL).
    """
    out = tokenizer.apply_chat_template(
        chat["messages"], tools=chat.get("tools") or None, tokenize=True, return_dict=True,
        return_assistant_tokens_mask=True, **(render_kwargs or {}),
    )
    ids = list(out["input_ids"])
    mask = list(out["assistant_masks"])
    if not any(mask) and any(m.get("role") == "assistant" for m in chat["messages"]):
        raise ValueError("the chat template marks no assistant tokens: it needs {% generation %} markers "
                         "(load the tokenizer with ark.distill.student.load_tokenizer)")
    labels = [t if m else IGNORE_INDEX for t, m in zip(ids, mask)]
    truncated = max_length is not None and len(ids) > max_length
    if truncated:
        ids, labels = ids[:max_length], labels[:max_length]
    return {"input_ids": ids, "labels": labels, "truncated": truncated}


def build_examples(chats: Iterable[dict[str, Any]], tokenizer, render_kwargs: dict[str, Any] | None = None,
                   max_length: int | None = None) -> list[dict[str, Any]]:
    """Tokenize every chat; examples whose assistant tokens were all cut by truncation are dropped."""
    examples = []
    for chat in chats:
        ex = tokenize_chat(chat, tokenizer, render_kwargs, max_length)
        if any(label != IGNORE_INDEX for label in ex["labels"]):
            examples.append(ex)
    return examples


def examples_sha256(examples: list[dict[str, Any]]) -> str:
    """A digest of tokenized examples (their token ids and labels, in order): the SFT data a card names."""
    import hashlib

    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e["input_ids"], e["labels"]], separators=(",", ":")).encode())
    return h.hexdigest()


def to_dataset(examples: list[dict[str, Any]]):
    """A `datasets.Dataset` with the columns TRL's SFTTrainer takes as pre-tokenized (input_ids, labels)."""
    from datasets import Dataset

    return Dataset.from_dict({"input_ids": [e["input_ids"] for e in examples],
                              "labels": [e["labels"] for e in examples]})


def dataset_stats(examples: list[dict[str, Any]]) -> dict[str, Any]:
    """Token counts of a tokenized set: examples, tokens, assistant (labelled) tokens, truncated, max length."""
    lengths = [len(e["input_ids"]) for e in examples]
    assistant = sum(sum(1 for x in e["labels"] if x != IGNORE_INDEX) for e in examples)
    return {
        "examples": len(examples),
        "tokens": int(sum(lengths)),
        "assistant_tokens": int(assistant),
        "assistant_share": assistant / sum(lengths) if lengths else 0.0,
        "truncated": int(sum(bool(e.get("truncated")) for e in examples)),
        "max_tokens": max(lengths, default=0),
        "mean_tokens": sum(lengths) / len(lengths) if lengths else 0.0,
    }


# ---- checking the masking ------------------------------------------------------------------------

def labelled_spans(example: dict[str, Any], tokenizer) -> list[str]:
    """The decoded text of each maximal run of labelled tokens, in order."""
    spans, run = [], []
    for tok, lab in zip(example["input_ids"], example["labels"]):
        if lab != IGNORE_INDEX:
            run.append(tok)
        elif run:
            spans.append(run)
            run = []
    if run:
        spans.append(run)
    return [tokenizer.decode(s, skip_special_tokens=False, clean_up_tokenization_spaces=False) for s in spans]


def inference_targets(chat: dict[str, Any], tokenizer, render_kwargs: dict[str, Any] | None = None) -> list[str]:
    """For each assistant message, the text the model must produce at inference for it.

    Rendered prefix by prefix: the chat up to the message with the generation prompt, then up to and
    including the message; the target is the difference. Independent of the generation markers, so it
    checks them.
    """
    kw = dict(render_kwargs or {})
    tools = chat.get("tools") or None
    targets = []
    msgs = chat["messages"]
    for k, m in enumerate(msgs):
        if m.get("role") != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(msgs[:k], tools=tools, tokenize=False,
                                               add_generation_prompt=True, **kw)
        full = tokenizer.apply_chat_template(msgs[: k + 1], tools=tools, tokenize=False, **kw)
        if not full.startswith(prompt):
            raise ValueError(f"chat template is not prefix-preserving at message {k}")
        targets.append(full[len(prompt):])
    return targets


def check_masking(chat: dict[str, Any], example: dict[str, Any], tokenizer,
                  render_kwargs: dict[str, Any] | None = None) -> list[str]:
    """Problems with an example's labels (empty list = exactly the assistant spans carry labels).

    One labelled span per assistant message, each ending with that message's inference target, and no
    labelled span containing any system, user or tool text.
    """
    spans = labelled_spans(example, tokenizer)
    targets = inference_targets(chat, tokenizer, render_kwargs)
    problems = []
    if example.get("truncated"):
        targets = targets[: len(spans)]
    if len(spans) != len(targets):
        problems.append(f"{len(spans)} labelled spans for {len(targets)} assistant messages")
    for i, (span, target) in enumerate(zip(spans, targets)):
        if not span.endswith(target):
            problems.append(f"span {i} {span[-80:]!r} does not end with its target {target[-80:]!r}")
        elif not _EMPTY_THINK.fullmatch(span[: len(span) - len(target)]):
            # Only an empty think block (Qwen3 with thinking disabled) may precede the target.
            problems.append(f"span {i} starts with non-assistant text {span[: len(span) - len(target)][:80]!r}")
    others = [m.get("content") or "" for m in chat["messages"] if m.get("role") in ("system", "user", "tool")]
    for span in spans:
        for text in others:
            if len(text) >= 12 and text in span:
                problems.append(f"a labelled span contains non-assistant text {text[:60]!r}")
    return problems
