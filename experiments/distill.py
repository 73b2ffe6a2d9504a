"""Distil the ARK teacher into a student: SFT data from collected trajectories, LoRA training, adapter.

    python experiments/distill.py experiment=distill graph=prime distill.n_queries=600
    python experiments/distill.py experiment=distill graph=prime distill.student.model=Qwen/Qwen3-4B distill.size=4b
    # then: scripts/serve_vllm.sh Qwen/Qwen3-8B --adapters results/distill  (every Qwen3-8B adapter,
    #       each served under its directory name <graph>-qwen3-8b-<n>), and backbone=student-8b-600

Reads the collections of experiments/collect.py and writes ``<output_dir>/adapter/`` and
``<output_dir>/data_stats.json`` (`ark.distill.pipeline` documents them). GPU; ``make install-distill``.
The job is `ark.config.jobs.distill` over conf/experiment/distill.yaml.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from ark.config import jobs
from ark.config.location import conf_dir


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def main(cfg: DictConfig) -> None:
    jobs.distill(cfg)


if __name__ == "__main__":
    main()
