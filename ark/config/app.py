"""Hydra's own command line for a task, callable with an argument list: what ``@hydra.main`` does.

    from ark.config.app import launch
    from ark.config.run import job
    launch(job, "config", ["-m", "experiment=ablation", "graph=demo"])   # = python experiments/run.py -m ...

`launch` hands the arguments to Hydra exactly as a decorated script's command line (``-m`` sweeps,
launchers, ``--cfg job``, ``hydra.*`` overrides), over the configs of `ark.config.location.conf_dir`.
``ark run -m`` and ``ark diagnose -m`` go through it, so a sweep from the ``ark`` command is the sweep
``python experiments/run.py -m`` makes. ``job_name`` is Hydra's ``hydra.job.name`` (the name of the
job's log file), which a decorated script takes from its own file name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from ark.config.location import conf_dir


def launch(task: Callable, config_name: str, args: Sequence[str], job_name: str, prog: str = "ark") -> None:
    """Run ``task`` under Hydra's command line with ``args`` (Hydra exits the process on its own errors)."""
    import hydra

    main = hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name=config_name)(task)
    saved = sys.argv
    sys.argv = [prog, *args, f"hydra.job.name={job_name}"]
    try:
        main()
    finally:
        sys.argv = saved
