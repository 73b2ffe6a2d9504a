"""The Hydra layer: from ``conf/`` to a built, checked run. The one package of ``ark`` that imports
hydra and omegaconf; everything below it takes plain arguments and dataclasses.

    from ark.config.compose import compose
    from ark.config.evaluation import run
    summary = run(compose(["graph=demo", "retriever=bm25", "limit=5"]))   # = python experiments/run.py ...

- `ark.config.location`: where the configs are (`conf_dir`, `option_names`);
- `ark.config.compose`: the one `compose` and `sweep_points`, for every entry point, script and test;
- `ark.config.app`: Hydra's own command line for a task (``ark run -m``, ``ark diagnose -m``);
- `ark.config.retrievers`: the factories ``conf/retriever/*.yaml`` build (`build_ark`, `build_bm25`, ...);
- `ark.config.checks`: the settings check (one line per bad value, with the valid choices);
- `ark.config.identity`: run identity, fingerprint, and the same-run check on a run directory;
- `ark.config.prerequisites`: what would stop a run before its first query (files, keys, caches);
- `ark.config.evaluation`: the evaluation run, `run(cfg)`: check -> identity -> lock -> build -> run the
  queries -> compare -> summary;
- `ark.config.jobs`: the other jobs (embed, diagnose, collect, distill);
- `ark.config.options`: single options for the ``ark`` command (a graph source, a backbone, labels).

The entry points are thin: ``experiments/*.py`` (``@hydra.main``) and the ``ark`` command (`ark.cli`).
"""

# the resolvers conf/ uses (${tables_name:...}, ${ark_home:}), registered before any entry point composes
from ark.config import compose as _compose  # noqa: E402,F401
