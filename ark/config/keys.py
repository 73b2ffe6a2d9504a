"""The keys of the configuration, and the check that every override names one.

Hydra answers ``lmit=3`` with "Could not override 'lmit' ... use +lmit=3", and then accepts ``+lmit=3``
without a word while the whole split runs. Here any key that is not part of the composed configuration,
given with or without ``+`` (or ``++``, or ``~``), is refused in one line naming the closest valid key
(difflib), before anything is read or written:

    unknown setting 'lmit' in +lmit=3: not a key of the configuration; the closest is limit (limit=3)

A key's last name alone (``build_embeddings=false``) is answered with every valid key of that name, and
the keys of that name other options of a group have (``retriever.build.build_embeddings`` with
``retriever=dense`` or ``hybrid``).

A key is part of the configuration when the composed config (with the command line's group choices,
e.g. ``retriever=dense``) has it, or when it is a parameter of the object a node builds (its
``_target_``: the fields of ``ark.llm.client.BackboneConfig``, the arguments of
``ark.search.embeddings.OpenAIEncoder``, ...), which ``+`` adds (``+backbone.http=openai``); below a
parameter that holds a mapping (``+backbone.agent={...}``, ``+ablation.tools.switches.count_nodes=false``)
any key is taken. Hydra's own keys (``hydra.*``, ``hydra/launcher=...``) are Hydra's to check.

`ark.config.compose.compose` calls `check_overrides` on every composition (and so every point of a
sweep before it is launched): a plain run, ``ark run``, ``ark run -m``, ``python experiments/run.py [-m]``.

    unknown_keys(["+lmit=3", "graph=demo"], compose=hydra_compose)   # ["unknown setting 'lmit' in +lmit=3: ..."]
    valid_keys(compose(["graph=demo"]))         # every dotted key a run config takes
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import typing
from collections.abc import Mapping, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from ark.config.location import conf_dir

TARGET = "_target_"


def _parse(overrides: Sequence[str]):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(list(overrides))


def _is_group(o) -> bool:
    """A config group choice (``graph=demo``, ``hydra/launcher=basic``, ``group@pkg=x``) or Hydra's own key."""
    key = o.key_or_group
    if key.split(".")[0].split("/")[0] == "hydra" or "/" in key or o.package is not None:
        return True
    return (conf_dir() / key).is_dir()


def _target_params(target: str) -> dict[str, object] | None:
    """Parameter name -> annotation of what ``target`` builds; None when it takes any keyword."""
    from hydra.utils import get_object

    try:
        obj = get_object(target)
    except Exception:  # noqa: BLE001 - a target that does not import is the settings check's to report
        return {}
    if dataclasses.is_dataclass(obj):
        hints = typing.get_type_hints(obj) if isinstance(obj, type) else {}
        return {f.name: hints.get(f.name, f.type) for f in dataclasses.fields(obj)}
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return {name: p.annotation for name, p in sig.parameters.items()}


def _holds_mapping(annotation) -> bool:
    """Whether a parameter's annotation takes a mapping (so any key below it is the parameter's own)."""
    if annotation in (dict, Mapping, typing.Any, inspect.Parameter.empty):
        return True
    text = str(annotation)
    return "dict" in text or "Mapping" in text or "Any" in text


def _select(cfg: DictConfig, parts: Sequence[str]):
    """The node at ``parts``, interpolations (``${backbone}``) followed; None when it cannot be had."""
    try:
        return OmegaConf.select(cfg, ".".join(parts), throw_on_missing=False)
    except Exception:  # noqa: BLE001 - an interpolation that does not resolve (yet): not a mapping
        return None


def _takes(node, part: str, last: bool) -> bool:
    """Whether the object ``node`` builds (its ``_target_``) takes ``part``: True for a parameter
    (anything below it when it holds a mapping), and for any name when it takes ``**kwargs``."""
    target = node.get(TARGET, None) if isinstance(node, DictConfig) else None
    if not isinstance(target, str):
        return False
    params = _target_params(target)
    if params is None:
        return True
    return part in params and (last or _holds_mapping(params[part]))


def is_known(cfg: DictConfig, key: str) -> bool:
    """Whether ``key`` (dotted) is part of the configuration ``cfg`` (see the module doc)."""
    parts = key.split(".")
    node = cfg
    for i, part in enumerate(parts):
        if isinstance(node, ListConfig):
            return part.isdigit() and int(part) < len(node)
        if not isinstance(node, DictConfig):
            return False
        if part in node:
            node = _select(cfg, parts[:i + 1])
            continue
        if i and node.is_empty():
            return True     # an empty mapping in the config (extra_body: {}) takes keys of its own
        if _takes(node, part, last=i == len(parts) - 1):
            return True
        # below a parameter that holds a mapping, at any depth (ablation.tools.switches.<name>,
        # backbone.extra_body.rules.<name>)
        return any(_takes(_select(cfg, parts[:j - 1]) if j > 1 else cfg, parts[j - 1], last=False)
                   for j in range(i, 0, -1))
    return True


def valid_keys(cfg: DictConfig) -> list[str]:
    """Every dotted key of ``cfg`` (Hydra's node aside), with the parameters of each ``_target_`` node."""
    out: list[str] = []

    def walk(node, prefix: str) -> None:
        if not isinstance(node, DictConfig):
            return
        if isinstance(node.get(TARGET, None), str):
            out.extend(f"{prefix}{p}" for p in (_target_params(node[TARGET]) or {}))
        for k in node.keys():
            if k == "hydra" and not prefix:
                continue
            out.append(f"{prefix}{k}")
            child = node._get_node(k)
            if isinstance(child, DictConfig) and not child._is_interpolation():
                walk(child, f"{prefix}{k}.")

    walk(cfg, "")
    return sorted({k for k in out if not k.endswith(TARGET) and not k.split(".")[-1].startswith("_")})


def closest(key: str, keys: Sequence[str]) -> str | None:
    """The valid key most like ``key``: the rest of the key compared among the keys under its deepest
    valid prefix (``budget.agent.tmax`` -> ``budget.agent.t_max``), else its last part among the last
    parts of every key (``rmp`` -> ``backbone.rpm``)."""
    parts = key.split(".")
    for depth in range(len(parts) - 1, -1, -1):
        prefix = ".".join(parts[:depth]) + "." if depth else ""
        pool = {k[len(prefix):]: k for k in keys if k.startswith(prefix)}
        if pool:
            found = difflib.get_close_matches(key[len(prefix):], list(pool), n=1, cutoff=0.6)
            if found:
                return pool[found[0]]
            break
    last = {}
    for k in keys:
        last.setdefault(k.split(".")[-1], k)
    found = difflib.get_close_matches(parts[-1], list(last), n=1, cutoff=0.75)
    return last[found[0]] if found else None


def unknown_keys(overrides: Sequence[str], config_name: str = "config", compose=None,
                 only_added: bool = False) -> list[str]:
    """One line per override whose key is not part of the configuration (see the module doc); empty when
    all are. ``compose(overrides, config_name)``: Hydra's composition, of the overrides' group choices
    here (`ark.config.compose.hydra_compose`); ``only_added``: check only ``+``/``++`` overrides (a plain
    one that composed names a real key)."""
    parsed = [o for o in _parse(overrides) if not _is_group(o)]
    if only_added:
        parsed = [o for o in parsed if o.type.name in ("ADD", "FORCE_ADD")]
    if not parsed:
        return []
    groups = [o.input_line for o in _parse(overrides) if _is_group(o) and not o.is_sweep_override()]
    try:
        base = compose(groups, config_name)
    except Exception:  # noqa: BLE001 - a bad group choice is Hydra's to report, in its own words
        return []
    problems, keys = [], None
    for o in parsed:
        key = o.key_or_group
        if is_known(base, key):
            continue
        keys = keys if keys is not None else valid_keys(base)
        value = o.input_line.split("=", 1)[1] if "=" in o.input_line else ""
        problems.append(f"unknown setting {key!r} in {o.input_line}: not a key of the configuration; "
                        + _hint(key, value, keys, config_name))
    return problems


def _hint(key: str, value: str, keys: Sequence[str], config_name: str) -> str:
    """Where to look instead of ``key``: every valid key of the same last name when there are several
    (``build_embeddings`` -> ``retriever.build.build_embeddings`` and ``search.setup.build_embeddings``),
    else the closest; then the keys of that name that other options of a group have."""
    last = key.split(".")[-1]
    same = [k for k in keys if k.split(".")[-1] == last]
    example = lambda k: f" ({k}={value})" if value else ""  # noqa: E731
    if len(same) > 1:
        hint = f"the keys named {last} are {', '.join(same[:-1])} and {same[-1]}" + example(same[-1])
    else:
        near = closest(key, keys)
        script = "run" if config_name == "config" else config_name
        hint = (f"the closest is {near}" + example(near) if near
                else f"python experiments/{script}.py --cfg job lists the keys")
    elsewhere = {k: opts for k, opts in keys_in_options(last).items() if k not in same}
    if elsewhere:
        hint += "; with another option: " + ", ".join(
            f"{k} ({k.split('.')[0]}={' or '.join(opts)})" for k, opts in sorted(elsewhere.items()))
    return hint


def keys_in_options(last: str) -> dict[str, list[str]]:
    """{dotted key: the options that have it} for the keys named ``last`` (their last part) that the
    option files of conf/'s groups write themselves (``retriever.build.build_embeddings``: dense,
    hybrid); experiment overlays (``@package _global_``) and Hydra's groups aside."""
    found: dict[str, list[str]] = {}
    for group in sorted(p for p in conf_dir().iterdir() if p.is_dir() and p.name not in ("hydra", "experiment")):
        for option in sorted(group.glob("*.yaml")):
            text = option.read_text()
            if "@package" in text:
                continue
            for k in _written_keys(OmegaConf.create(text), group.name + "."):
                if k.split(".")[-1] == last:
                    found.setdefault(k, []).append(option.stem)
    return found


def _written_keys(node, prefix: str) -> list[str]:
    if not isinstance(node, DictConfig):
        return []
    out = []
    for k in node.keys():
        out.append(f"{prefix}{k}")
        child = node._get_node(k)
        if isinstance(child, DictConfig) and not child._is_interpolation():
            out += _written_keys(child, f"{prefix}{k}.")
    return out


def check_overrides(overrides: Sequence[str], config_name: str = "config", compose=None,
                    only_added: bool = False) -> None:
    """Raise ValueError with the first unknown key's line (`unknown_keys`)."""
    problems = unknown_keys(overrides, config_name, compose, only_added)
    if problems:
        raise ValueError(problems[0])
