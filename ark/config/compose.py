"""Composing configs: the one `compose` and `sweep_points` that entry points, scripts and tests share.

    from ark.config.compose import compose, sweep_points
    cfg = compose(["graph=demo", "retriever=bm25", "limit=5"])          # conf/config.yaml + overrides
    cfg = compose(["graph=demo"], config_name="diagnose")              # conf/diagnose.yaml
    sweep_points(["experiment=table1"])                                # one override list per run

`compose` is Hydra's own composition (no sweep expansion) of the configs `ark.config.location.conf_dir`
names, with the ``hydra`` node included, as ``@hydra.main`` would see it. `sweep_points` expands an
experiment's ``hydra.sweeper.params`` and the command line's sweeps with Hydra's basic sweeper.
"""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from ark.config.location import conf_dir


def _tables_name(path) -> str:
    """``${tables_name:<path>}`` in ``conf/graph/tables.yaml``: the folder's own name for its graph
    (`ark.data.tables.read.default_name`: ``graph.json``'s ``name``, else the folder's)."""
    from ark.data.tables.read import default_name

    return default_name(None if path is None else str(path))


def _ark_home() -> str:
    """``${ark_home:}`` in ``conf/config.yaml`` (``paths.data``): `ark.home.ark_home`, as a string."""
    from ark.home import ark_home

    return str(ark_home())


def _repo_file(path) -> str:
    """``${repo_file:<path>}``: a file the repository ships (e.g. ``results/distill/...``), as an absolute
    path, so a config names it the same from any working directory."""
    from ark.config.location import repo_root

    return str(repo_root() / str(path))


# registered on import: every composition (Hydra's own too) has them
for _name, _resolver in (("tables_name", _tables_name), ("ark_home", _ark_home), ("repo_file", _repo_file)):
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _resolver)


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """The composed config ``config_name`` (``conf/<config_name>.yaml``) under ``overrides``; an override
    whose key is not part of the configuration, with or without ``+``, is a ValueError in one line naming
    the closest valid key (`ark.config.keys`)."""
    from ark.config.keys import check_overrides

    try:
        cfg = hydra_compose(overrides, config_name)
    except Exception:
        check_overrides(overrides, config_name, hydra_compose)   # an unknown key: in one line, not Hydra's words
        raise
    check_overrides(overrides, config_name, hydra_compose, only_added=True)   # +key=... Hydra took silently
    return cfg


def hydra_compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Hydra's own composition of ``config_name`` under ``overrides`` (no check of the keys)."""
    from hydra import compose as _compose
    from hydra import initialize_config_dir

    where = conf_dir()
    if not (where / f"{config_name}.yaml").is_file():
        raise FileNotFoundError(f"no {config_name}.yaml in {where}: this copy of ark has no configs; install "
                                "it with pip install . (or -e .) from a checkout, which ships conf/ with it")
    with initialize_config_dir(config_dir=str(where), version_base="1.3"):
        return _compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)


def sweep_points(overrides: Sequence[str] = (), config_name: str = "config") -> list[list[str]]:
    """The override lists of an experiment's runs, expanded by Hydra's own basic sweeper: its
    ``hydra.sweeper.params`` first, then the command line's overrides (sweeps such as ``split=test,val``
    included), which win on the same key."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    fixed = [o.input_line for o in parser.parse_overrides(list(overrides)) if not o.is_sweep_override()]
    cfg = compose(fixed, config_name)   # the experiment's own sweep, read before the command line's
    params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.get("params") or {}).items()]
    parsed = parser.parse_overrides([*params, *overrides])
    return BasicSweeper.split_arguments(parsed, None)[0]


def one_line(e: BaseException) -> str:
    """The innermost message of ``e`` (Hydra wraps a constructor's ValueError) on one line."""
    while e.__cause__ is not None:
        e = e.__cause__
    return " ".join(str(e).split())
