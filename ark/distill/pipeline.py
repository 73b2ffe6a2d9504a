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

import json
import logging
from pathlib import Path
from typing import Any

from ark.distill.sft_data import build_examples, dataset_stats, load_trajectories, trainable_chat
from ark.distill.student import StudentConfig, load_model, load_tokenizer
from ark.distill.train import DistillConfig, TrainResult, train_lora

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


def distill(student: StudentConfig, train: DistillConfig, train_dirs: list[Path], val_dirs: list[Path] | None = None,
            n_queries: int | None = None, teacher: str = "gpt-4.1", graph: str = "?", model=None, tokenizer=None,
            ) -> TrainResult:
    """Build SFT data from the collections and train the student's LoRA adapter.

    `model`/`tokenizer` may be passed in (tests reuse a loaded student); else they are loaded from `student`.
    """
    train_trajs = first_queries(load_trajectories(*map(Path, train_dirs)), n_queries)
    val_trajs = load_trajectories(*map(Path, val_dirs)) if val_dirs else []
    tokenizer = tokenizer or load_tokenizer(student)
    kw = student.render_kwargs()
    train_chats = [c for c in map(trainable_chat, train_trajs) if c is not None]
    val_chats = [c for c in map(trainable_chat, val_trajs) if c is not None]
    train_ex = build_examples(train_chats, tokenizer, kw, train.max_length)
    val_ex = build_examples(val_chats, tokenizer, kw, train.max_length)
    summaries = collect_summaries(list(map(Path, train_dirs)))
    uses_labels = any(s.get("uses_labels") for s in summaries)
    stats = {"train": dataset_stats(train_ex), "val": dataset_stats(val_ex),
             "train_queries": len({str(t.query_id) for t in train_trajs}), "uses_labels": uses_labels}
    train.output_dir.mkdir(parents=True, exist_ok=True)
    (train.output_dir / "data_stats.json").write_text(json.dumps(stats, indent=2), encoding="utf-8")
    log.info("SFT data: %s", stats)
    card: dict[str, Any] = {"teacher": teacher, "student": student.name, "graph": graph,
                            "queries": stats["train_queries"], "rejection_sampling": uses_labels,
                            "train_dirs": [str(d) for d in train_dirs], "val_dirs": [str(d) for d in val_dirs or []],
                            "chat_template": student.chat_template, "enable_thinking": student.enable_thinking}
    model = model if model is not None else load_model(student)
    return train_lora(model, tokenizer, train_ex, val_ex or None, train, card)
