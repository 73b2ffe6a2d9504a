"""The distillation pipeline: collected teacher trajectories -> SFT data -> a student's LoRA adapter.

Input: the run directories that `ark.distill.collect` wrote (train split, and the validation split for
early stopping). `n_queries` keeps the trajectories of the first n collected queries, so the paper's
"distilled 600" student comes from the same 6,000-query collection as "distilled 6000" (the collection
order is a fixed permutation). Output: `<output_dir>/adapter/` (LoRA weights, tokenizer with the training
chat template, README.md model card, distill_info.json) and `<output_dir>/data_stats.json`.

    python experiments/distill.py distill.train_dirs=[results/runs/collect/prime/collect-gpt-4.1] \
        distill.val_dirs=[results/runs/collect-val/prime/collect-gpt-4.1] distill.n_queries=600
    # then: scripts/serve_vllm.sh Qwen/Qwen3-8B --adapters results/distill  (every Qwen3-8B adapter,
    #       each served under its directory name <graph>-qwen3-8b-<n>), and backbone=student-8b-600

`distill()` takes plain objects and is what tests call; the entry point (`ark.config.jobs.distill`,
called by experiments/distill.py) builds them from conf/experiment/distill.yaml (a `distill:` block).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark.distill.sft_data import (build_examples, dataset_stats, examples_sha256, load_trajectories, repeated,
                                  several_calls, trainable_chat)
from ark.distill.student import StudentConfig, load_model, load_tokenizer
from ark.distill.train import (DistillConfig, TrainResult, adapter_sha256, resume_point, train_lora,
                              training_inputs, with_init_adapter, write_card)

GGUF_ADAPTER = "adapter.gguf"   # the llama.cpp adapter of a GGUF student, beside its card in output_dir

log = logging.getLogger(__name__)


def first_queries(trajectories: list, n_queries: int | None) -> list:
    """Trajectories of the first n distinct query ids, in file order (all when n is None)."""
    if n_queries is None:
        return list(trajectories)
    keep: list = []
    seen: set = set()
    for t in trajectories:
        if str(t.query_id) not in seen:
            if len(seen) == n_queries:
                continue
            seen.add(str(t.query_id))
        keep.append(t)
    return keep


def collect_summaries(dirs: list[Path]) -> list[dict]:
    """The collect_summary.json of each collection directory that has one."""
    out = []
    for d in dirs:
        p = Path(d) / "collect_summary.json"
        if p.is_file():
            out.append(json.loads(p.read_text(encoding="utf-8")))
    return out


def trajectories_sha256(trajectories: list) -> str:
    """A digest of what a student learns from collected trajectories: each one's chat (messages and tool
    schemas, `Trajectory.to_chat`) in collection order; the timings a collection also records are left
    out, so the same teacher on the same graph gives the same digest on any machine."""
    h = hashlib.sha256()
    for t in trajectories:
        h.update(json.dumps(t.to_chat(), sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()


@dataclass
class SFTInputs:
    """What a student is trained on and what its card says of it (`sft_inputs`)."""

    train: list[dict]  # tokenized examples (`ark.distill.sft_data.build_examples`)
    val: list[dict]
    card: dict[str, Any]  # teacher, student, data digests, ... (the model card's facts)
    stats: dict[str, Any]  # dataset_stats of train and val, queries, whether labels were used


def sft_inputs(student: StudentConfig, train: DistillConfig, train_dirs: list[Path], val_dirs: list[Path] | None,
               tokenizer, n_queries: int | None = None, teacher: str = "gpt-4.1", graph: str = "?",
               val_queries: int | None = None, command: str | None = None) -> SFTInputs:
    """The SFT examples of the collections (the first `n_queries` train and `val_queries` val queries) and
    the card's facts: teacher, student, template, the digests of the trajectories and of the examples."""
    train_trajs = first_queries(load_trajectories(*map(Path, train_dirs)), n_queries)
    val_trajs = first_queries(load_trajectories(*map(Path, val_dirs)), val_queries) if val_dirs else []
    kw = student.render_kwargs()
    train_chats = [c for c in map(trainable_chat, train_trajs) if c is not None]
    multi = sum(map(several_calls, train_chats))
    train_chats = repeated(train_chats, train.multi_call_repeats)
    val_chats = [c for c in map(trainable_chat, val_trajs) if c is not None]
    train_ex = build_examples(train_chats, tokenizer, kw, train.max_length)
    val_ex = build_examples(val_chats, tokenizer, kw, train.max_length)
    uses_labels = any(s.get("uses_labels") for s in collect_summaries(list(map(Path, train_dirs))))
    stats = {"train": dataset_stats(train_ex), "val": dataset_stats(val_ex),
             "train_queries": len({str(t.query_id) for t in train_trajs}), "uses_labels": uses_labels,
             "several_calls": multi, "multi_call_repeats": train.multi_call_repeats}
    card: dict[str, Any] = {"teacher": teacher, "student": student.name, "graph": graph,
                            "queries": stats["train_queries"], "rejection_sampling": uses_labels,
                            "train_dirs": [str(d) for d in train_dirs], "val_dirs": [str(d) for d in val_dirs or []],
                            "val_queries": len({str(t.query_id) for t in val_trajs}),
                            "chat_template": student.chat_template, "enable_thinking": student.enable_thinking,
                            "trajectories_sha256": trajectories_sha256(train_trajs),
                            "sft_sha256": examples_sha256(train_ex)}
    if train.init_adapter is not None:
        card["init_adapter"] = str(train.init_adapter)
        card["init_adapter_sha256"] = adapter_sha256(train.init_adapter)
    if command:
        card["command"] = command
    return SFTInputs(train_ex, val_ex, card, stats)


def distill(student: StudentConfig, train: DistillConfig, train_dirs: list[Path], val_dirs: list[Path] | None = None,
            n_queries: int | None = None, teacher: str = "gpt-4.1", graph: str = "?", model=None, tokenizer=None,
            val_queries: int | None = None, command: str | None = None) -> TrainResult:
    """Build SFT data from the collections (`sft_inputs`) and train the student's LoRA adapter.

    `model`/`tokenizer` may be passed in (tests reuse a loaded student); else they are loaded from `student`.
    `val_queries` keeps the first n validation queries (validation costs a forward pass per trajectory
    each time). A GGUF student (SmolLM2 on CPU) also gets `GGUF_ADAPTER`, the adapter llama.cpp serves,
    with the card and distill_info.json beside it in ``train.output_dir``: the files a shipped student holds.
    A rerun with the same inputs goes on from the latest checkpoint in ``train.output_dir``.
    """
    tokenizer = tokenizer or load_tokenizer(student)
    data = sft_inputs(student, train, train_dirs, val_dirs, tokenizer, n_queries, teacher, graph, val_queries, command)
    resume_point(train, training_inputs(data.train, data.val, train, student.name))   # other inputs: refused here
    model = model if model is not None else load_model(student)
    model = with_init_adapter(model, train)   # an adapter that does not fit: refused here too
    train.output_dir.mkdir(parents=True, exist_ok=True)
    (train.output_dir / "data_stats.json").write_text(json.dumps(data.stats, indent=2), encoding="utf-8")
    log.info("SFT data: %s", data.stats)
    result = train_lora(model, tokenizer, data.train, data.val or None, train, data.card)
    if student.gguf_file:
        publish_gguf(result, train, data.card, Path(student.model) / student.gguf_file)
    return result


def publish_gguf(result: TrainResult, train: DistillConfig, card: dict[str, Any], base: Path) -> Path:
    """Write the chosen adapter as `GGUF_ADAPTER` in ``train.output_dir`` (`ark.distill.gguf_adapter`), with
    the card and distill_info.json naming it (its size and SHA-256, and the base's) beside it."""
    from ark.data.sources import file_digest
    from ark.distill.gguf_adapter import write_gguf_lora

    out = write_gguf_lora(result.adapter_dir, train.output_dir / GGUF_ADAPTER, base_gguf=base)
    size = out.stat().st_size
    card["gguf"] = {"file": out.name, "bytes": size, "sha256": file_digest(out),
                    "base": base.name, "base_sha256": file_digest(base)}
    write_card(train.output_dir, card, train, result)
    write_card(result.adapter_dir, card, train, result)
    log.info("GGUF adapter: %s (%d bytes)", out, size)
    return out
