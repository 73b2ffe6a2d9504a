"""Two run directories paired over the queries both scored: the paired differences of
`ark.analysis.paired` for each metric.

Queries are matched by id among those ``ok`` in both runs (``include_failed=True`` scores a failed
query as 0 instead); a query whose gold differs between the runs means they are not over the same
queries, and is an error.

    from ark.report.comparison import compare_runs
    for d in compare_runs("results/runs/ablation/prime/ark-gpt-4.1-t20_n3-no_neighbors",
                          "results/runs/ablation/prime/ark-gpt-4.1-t20_n3-full"):
        print(d.metric, d.diff, d.ci_low, d.ci_high, d.p_value, d.significant)

    ark compare RUN REFERENCE [--test permutation]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ark.analysis.paired import ALPHA, METRICS, PairedDiff, check_settings, paired_diff
from ark.run import rundir


def aligned(run: rundir.RunDir, reference: rundir.RunDir, metric: str, include_failed: bool = False
            ) -> tuple[list[str], list[float], list[float]]:
    """(query keys, run scores, reference scores) over the queries both runs scored."""
    a = run.per_query_metric(metric, include_failed)
    b = reference.per_query_metric(metric, include_failed)
    keys = [k for k in a if k in b]
    for k in keys:
        ga, gb = rundir.gold(run.record(k)), rundir.gold(reference.record(k))
        if sorted(ga) != sorted(gb):
            raise ValueError(f"query {k} has gold {ga} in {run.path} but {gb} in {reference.path}: "
                             "the runs are not over the same queries")
    return keys, [a[k] for k in keys], [b[k] for k in keys]


def compare_runs(run: rundir.RunDir | Path | str, reference: rundir.RunDir | Path | str,
                 metrics: Sequence[str] = METRICS, include_failed: bool = False, n_boot: int = 1000,
                 seed: int = 0, test: str = "wilcoxon", alpha: float = ALPHA) -> list[PairedDiff]:
    """`PairedDiff` of ``run`` minus ``reference`` for each metric, over their common queries."""
    check_settings(test, alpha, n_boot)
    run = run if isinstance(run, rundir.RunDir) else rundir.RunDir(run)
    reference = reference if isinstance(reference, rundir.RunDir) else rundir.RunDir(reference)
    out = []
    for m in metrics:
        _, a, b = aligned(run, reference, m, include_failed)
        out.append(paired_diff(a, b, m, n_boot, seed, test, alpha))
    return out
