"""Paired comparison of two runs' per-query scores over the same queries: difference, paired bootstrap
CI, paired test. Two run directories are paired by `ark.report.comparison.compare_runs`.

Per-run bootstrap intervals overlap even when one variant wins on nearly every query; a backbone or a
toolset ablation is always run on the same queries as the run it is compared with, so the per-query
differences d_i = run_i - reference_i carry the comparison. For each metric this module reports

* the mean difference (``diff``; in the metric's units, [0, 1]);
* a paired bootstrap 95% interval: queries resampled with replacement, the mean of d over each
  resample, the 2.5th and 97.5th percentiles (``n_boot`` resamples, ``seed``);
* a paired test from scipy: the Wilcoxon signed-rank test (``test="wilcoxon"``, the default; zero
  differences dropped, scipy's ``zero_method="wilcox"``; all-zero differences give p = 1) or a sign-flip
  permutation test of the mean difference (``test="permutation"``, ``scipy.stats.permutation_test``);
* ``significant``: p < ``alpha`` (0.05).

    d = paired_diff(run_scores, reference_scores, "hit@1")
    print(d.diff, d.ci_low, d.ci_high, d.p_value, d.significant)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

TESTS = ("wilcoxon", "permutation")
ALPHA = 0.05
METRICS = ("hit@1", "hit@5", "recall@20", "mrr")


@dataclass
class PairedDiff:
    """One metric of ``run`` against ``reference`` over their common queries."""

    metric: str
    n: int               # queries in both
    mean: float          # the run's mean over them
    mean_reference: float
    diff: float          # mean of run - reference
    ci_low: float        # paired bootstrap 95% interval of diff
    ci_high: float
    p_value: float
    test: str
    significant: bool    # p_value < alpha
    wins: int            # queries where the run scores higher
    losses: int          # ... lower
    ties: int

    def to_json(self) -> dict:
        return asdict(self)


def check_settings(test: str, alpha: float, n_boot: int) -> None:
    if test not in TESTS:
        raise ValueError(f"unknown paired test {test!r}; valid tests: {', '.join(TESTS)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")


def paired_test(d: np.ndarray, test: str = "wilcoxon", n_resamples: int = 9999, seed: int = 0) -> float:
    """Two-sided p-value that the paired differences ``d`` are centred on 0."""
    from scipy import stats

    d = np.asarray(d, dtype=float)
    if d.size == 0 or not np.any(d != 0):
        return 1.0
    if test == "wilcoxon":
        return float(stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)
    if test == "permutation":
        res = stats.permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                                     n_resamples=n_resamples, alternative="two-sided", vectorized=True,
                                     random_state=seed)
        return float(res.pvalue)
    raise ValueError(f"unknown paired test {test!r}; valid tests: {', '.join(TESTS)}")


def paired_diff(values: Sequence[float], reference: Sequence[float], metric: str = "", n_boot: int = 1000,
                seed: int = 0, test: str = "wilcoxon", alpha: float = ALPHA) -> PairedDiff:
    """Paired difference of two aligned per-query score lists (``values[i]`` and ``reference[i]``
    belong to the same query)."""
    check_settings(test, alpha, n_boot)
    a = np.asarray(values, dtype=float)
    b = np.asarray(reference, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired scores need two lists of one length, got {a.shape} and {b.shape}")
    n = a.size
    if n == 0:
        nan = math.nan
        return PairedDiff(metric, 0, nan, nan, nan, nan, nan, nan, test, False, 0, 0, 0)
    d = a - b
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    p = paired_test(d, test, seed=seed)
    return PairedDiff(metric, n, float(a.mean()), float(b.mean()), float(d.mean()), float(lo), float(hi), p, test,
                      bool(p < alpha), int((d > 0).sum()), int((d < 0).sum()), int((d == 0).sum()))


def as_summary(diffs: Sequence[PairedDiff]) -> dict[str, dict]:
    """{metric: PairedDiff fields} for metrics.json and the figures' data."""
    return {d.metric: d.to_json() for d in diffs}


def format_table(diffs: Sequence[PairedDiff], scale: float = 100.0) -> str:
    head = f"{'metric':>10} {'n':>5} {'run':>7} {'ref':>7} {'diff':>7} {'95% CI':>17} {'p':>8}  W/L/T"
    lines = [head]
    for d in diffs:
        star = "*" if d.significant else " "
        lines.append(f"{d.metric:>10} {d.n:>5} {scale * d.mean:7.2f} {scale * d.mean_reference:7.2f} "
                     f"{scale * d.diff:+7.2f} [{scale * d.ci_low:+6.2f}, {scale * d.ci_high:+6.2f}] "
                     f"{d.p_value:8.4f}{star} "
                     f"{d.wins}/{d.losses}/{d.ties}")
    return "\n".join(lines)
