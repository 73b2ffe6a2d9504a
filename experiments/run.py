"""One evaluation run (or a sweep of them) from the Hydra configs in conf/.

    python experiments/run.py graph=demo backbone=local limit=5          # one run
    python experiments/run.py retriever=bm25 graph=prime split=test       # the BM25 baseline
    python experiments/run.py -m experiment=table1                        # the paper's Table 1 sweep
    python experiments/run.py graph=prime shard=0/4                       # a shard; merge with
    ark merge results/runs/default/prime/ark-gpt-4.1-t20_n3-full_test
    python experiments/run.py ablation=no_neighbors compare_to=RUN_DIR   # paired with another run

``ark run ...`` and ``ark run -m ...`` do the same. Everything the run does lives in the library:
`ark.config.evaluation.run` (check settings -> run identity -> lock -> build -> run the queries -> compare ->
summary), which tests call with a composed config (`ark.config.compose.compose`); the option files build
their objects with ``_target_`` (``conf/retriever/*.yaml``: `ark.config.retrievers`). The run directory is
``results/runs/<experiment>/<graph>/<run_name>_<split>[_limit<n>]/`` (``run_name``:
``ark-<backbone>-<budget>-<ablation>[-<search>-<encoder>]``, ``bm25``, or ``dense|hybrid-<encoder>-none-none``);
rerunning the same command resumes it (finished queries are skipped, failed and degraded ones retried,
and the LLM cache answers the calls already made).

Before anything is read or written every setting is checked (one line per bad value, naming the valid
choices). ``run.json`` records the run's identity (every resolved setting that can change its records or
summary, secrets redacted, and the fingerprints of the graph's input and query files) and its
fingerprint; a command whose identity differs is refused on a directory holding finished queries, with
one line naming the differing settings or the changed files, and ``run.lock`` refuses a second writer
while one is running. A sweep over a setting that is not in the directory name (e.g. ``seed=0,1``) gives
each point its own directory, the setting appended to its name (``..._test_seed1``; `ark.config.sweep`).
A paid run is forecast, confirmed above ``confirm_usd`` and capped by ``max_cost_usd`` (`ark.config.plan`):

    python experiments/run.py graph=prime estimate=true                  # the forecast: free, no LLM call
    python experiments/run.py graph=prime pilot=true max_cost_usd=5      # a pilot of 10 queries, its own directory
    python experiments/run.py -m experiment=table1 max_cost_usd=200       # a capped sweep

It exits with 3 (`ark.run.summary.INCOMPLETE_EXIT`) when the run, or a run of the sweep, ended not complete
(the spending cap, failed queries): rerunning the same command resumes it.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from ark.config.app import command_line, exit_status
from ark.config.evaluation import job
from ark.config.location import conf_dir


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def main(cfg: DictConfig) -> None:
    job(cfg)


if __name__ == "__main__":
    sys.argv = command_line(sys.argv, "config")   # keys checked, a sweep prepared (ark.config.sweep)
    main()
    sys.exit(exit_status(sys.argv, "config"))   # a sweep: 3 when one of its runs is not complete
