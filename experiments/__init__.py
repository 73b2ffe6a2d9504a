"""Thin Hydra entry points over the library: each composes a config, calls one function of `ark.config`
and nothing more (``run.py``: an evaluation run or sweep; ``diagnose.py``: the reachability ceiling;
``embed.py``: the node-embedding cache; ``collect.py`` and ``distill.py``: distillation). The ``ark``
command (`ark.cli`) makes the same calls."""
