"""`RunSettings`: how one evaluation run is run and scored (retriever, graph and split aside).

Read by the loop (`ark.run.runner`), a query's record (`ark.run.records`), the summary
(`ark.run.summary`) and the shard merge (`ark.run.shards`, which rebuilds them from a shard's
metrics.json). Plain dataclass: every bad value is refused when it is made, naming the valid ones.

    settings = RunSettings(out_dir="results/runs/x", concurrency=8, top=20)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ark.analysis.metrics import (CUTS, DEFAULT_TORCHMETRICS, MODES, TORCHMETRICS, parse_metric)

RUN_METRICS: tuple[str, ...] = ("hit@1", "hit@5", "hit@10", "recall@10", "recall@20", "mrr")


@dataclass
class RunSettings:
    """How to run and score one (retriever, graph, split)."""

    out_dir: Path                               # the run directory (created)
    concurrency: int = 16                       # queries in flight at once
    top: int = 20                               # ranking length scored: ARK 20, baselines 100
    metrics: tuple[str, ...] = RUN_METRICS      # per-query metrics (ark.analysis.metrics names)
    metrics_mode: str = "paper"                 # "paper", "stark_qa" or "authors" (see ark.analysis.metrics)
    torchmetrics: str = DEFAULT_TORCHMETRICS    # stark_qa mode's ranking semantics: "1.7.0" (default: STaRK's
                                                # published numbers) or "1.9"; it acts on a retriever's own
                                                # scores (baselines), not on ARK's votes (stark_scores)
    cut: str = "top_first"                      # cut to `top` before dropping non-candidates, or after
    count_failed_as_miss: bool = False          # score failed queries as all-zero and call it complete
    n_boot: int = 1000                          # bootstrap resamples for the 95% CIs
    seed: int = 0                               # bootstrap seed
    progress: bool = True                       # show the tqdm bar
    log_every: int = 25                         # push running metrics to the logger every n queries
    extra: dict = field(default_factory=dict)   # written into metrics.json["run"] (split, names, ...)
    external_id: Callable[[int], Any] | None = None  # node id -> the source's own id, recorded beside
                                                # ranking and gold as ranking_external/gold_external
    budget: Any = None                          # ark.cost.cap.Budget the run's LLM client spends under
                                                # (ark.run.spending: the cap stops the run, the bar shows it)
    forecast: dict | None = None                # what the run was forecast to pay (ark.cost.forecast)

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.top < 1:
            raise ValueError(f"top must be >= 1, got {self.top}")
        self.metrics = tuple(self.metrics)
        if self.metrics_mode not in MODES:
            raise ValueError(f"unknown metrics_mode {self.metrics_mode!r}; valid modes: {', '.join(MODES)}")
        if self.torchmetrics not in TORCHMETRICS:
            raise ValueError(f"unknown torchmetrics {self.torchmetrics!r}; valid: {', '.join(TORCHMETRICS)}")
        if self.cut not in CUTS:
            raise ValueError(f"unknown cut {self.cut!r}; valid: {', '.join(CUTS)}")
        for name in self.metrics:
            parse_metric(name)  # raises, listing the valid forms
