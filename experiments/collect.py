"""Teacher trajectories for distillation: the ARK teacher on a graph's train split (paper §4.3).

    python experiments/collect.py experiment=collect graph=prime                      # GPT-4.1, 6,000 queries
    python experiments/collect.py experiment=collect graph=prime split=val collect.n_queries=300
    python experiments/collect.py experiment=collect graph=demo backbone=local collect.n_queries=3 collect.t_max=3

Label-free by default (three trajectories per query at temperature 0.7, T_max 20, the gold answers
never read). The collection is a run directory like every evaluation run, so it resumes; on top it
writes ``trajectories.jsonl``, ``collect_summary.json`` and ``collect.json`` (`ark.distill.collect`
documents them). The job is `ark.config.jobs.collect` over conf/experiment/collect.yaml.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from ark.config import jobs
from ark.config.location import conf_dir


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def main(cfg: DictConfig) -> None:
    jobs.collect(cfg)


if __name__ == "__main__":
    main()
