"""The reachability ceiling of a graph's query set, without an LLM (`ark.analysis.reachability`).

    python experiments/diagnose.py graph=demo                         # the demo's 480 test queries
    python experiments/diagnose.py graph=demo limit=100 'reach.ks=[5,20,50]'
    python experiments/diagnose.py graph=prime split=test-0.1 ablation=no_type_filter 'reach.filters=[none]'

``ark diagnose ...`` does the same. Writes ``reach.json`` (summary per setting), ``reach_gold.csv``
(level of every gold node per setting) and ``reach_queries.csv`` (hits and one-hop pool per query) to
``out_dir`` (``results/diagnose/<graph>/<split>-<ablation>``) and prints the table. The job is
`ark.config.jobs.diagnose`, which tests call with ``compose(..., config_name="diagnose")``
(conf/diagnose.yaml); `ark.analysis.reachability.load_summaries` reads the folders back.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from ark.config import jobs
from ark.config.location import conf_dir


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="diagnose")
def main(cfg: DictConfig) -> None:
    jobs.diagnose(cfg)


if __name__ == "__main__":
    main()
