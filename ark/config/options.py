"""Single options of a config group, built for the ``ark`` command: a graph source, a backbone, labels.

    from ark.config.options import graph_source, backbone_config
    source = graph_source("demo")                                # conf/graph/demo.yaml, under ARK_HOME
    source = graph_source("tables", settings=["path=my_kg"])     # with settings of the option
    source = graph_source("path/to/my_kg")                       # a folder of tables
    backbone = backbone_config("gpt-4.1", base_url="http://localhost:8000/v1", model="my-model")

Each is composed with `ark.config.compose.compose` (``graph=<name>``, ``backbone=<name>``) and built
with its ``_target_``, so the ``ark`` command reads an option exactly as a run does. A bad name or
setting raises ValueError with one line naming it and the valid choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra.utils import instantiate

from ark.config.compose import compose, one_line
from ark.config.location import option_names


def graph_source(graph: str, root: str | Path | None = None, settings: Sequence[str] = ()):
    """The graph source for ``graph``: a ``conf/graph/<graph>.yaml`` (its ``_target_`` and settings, with
    ``key=value`` ``settings`` over them), or a path: a folder of tables or an RDF file
    (`ark.data.locate.source_for_path`); ``root`` is the data root (``paths.data``: STaRK files under ``<root>/stark``, caches under
    ``<root>/cache``; None: ARK_HOME, `ark.home`)."""
    choices = option_names("graph")
    path = Path(graph)
    if graph not in choices and path.exists():
        from ark.data.locate import source_for_path

        return source_for_path(path, root, **dict(_setting(s) for s in settings))
    if graph not in choices:
        from ark.data.locate import KINDS

        raise ValueError(f"unknown graph {graph!r}; valid graphs: {', '.join(choices)}, or {KINDS}")
    overrides = [f"graph={graph}", *(f"++graph.{'='.join(_setting(s))}" for s in settings)]
    try:
        cfg = compose(overrides)
        if root is not None:
            cfg.paths.data = str(root)
        return instantiate(cfg.graph)
    except Exception as e:  # Hydra wraps the source's own ValueError; show the source's message
        raise ValueError(one_line(e)) from None


def _setting(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise ValueError(f"bad graph setting {text!r}; write key=value (e.g. path=my_kg)")
    key, value = text.split("=", 1)
    return key, value


def backbone_config(name: str, base_url: str | None = None, model: str | None = None):
    """A `BackboneConfig` from ``conf/backbone/<name>.yaml``, with ``base_url``/``model`` replaced when
    given (any OpenAI-compatible endpoint)."""
    choices = option_names("backbone")
    if name not in choices:
        raise ValueError(f"unknown backbone {name!r}; valid backbones: {', '.join(choices)}")
    from omegaconf import open_dict

    cfg = compose([f"backbone={name}"])
    with open_dict(cfg):   # a hosted backbone's config names no base_url: the provider's is the default
        if base_url:
            cfg.backbone.base_url = base_url
        if model:
            cfg.backbone.model = model
    return instantiate(cfg.backbone)


def ablation_labels() -> dict[str, str]:
    """{ablation name: label} of the ``conf/ablation/`` options (each option's ``name`` and ``label``,
    how tables and figures name it), the full toolset first."""
    out = {}
    for option in option_names("ablation"):
        ablation = compose([f"ablation={option}"]).ablation
        out[ablation.name] = ablation.get("label", ablation.name)
    return dict(sorted(out.items(), key=lambda kv: kv[0] != "full"))
