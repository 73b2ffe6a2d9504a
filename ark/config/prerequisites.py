"""Prerequisites: what would stop a run before its first query, each with the way to fix it.

    from ark.config.prerequisites import prerequisite_problems, sweep_problems
    prerequisite_problems(compose(["graph=prime", "backbone=gpt-4.1"]))
    # ["... STaRK prime is missing ... ark download prime --root data",
    #  "backbone 'gpt-4.1' (provider openai) needs an API key: export OPENAI_API_KEY=... ..."]
    sweep_problems(["experiment=table1"])    # the same over every point of a sweep

The input files of the graph source (e.g. STaRK's), the key of a paid backbone, and, for a run that
must not build node embeddings itself (``build_embeddings=false``), the embedding cache; then, by
`check_prerequisites` in each job, whether the backbone's server accepts a connection (`server_problems`:
a malformed ``base_url`` is a bad setting already, an unreachable one is one line naming the URL here,
not six retries per agent).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from hydra.utils import instantiate
from omegaconf import DictConfig

from ark.config.checks import uses_encoder, uses_search

KEY_PROVIDERS = ("openai", "azure")


def embed_command(cfg: DictConfig) -> str:
    """The command line that builds the embedding cache ``cfg`` (a composed run config) reads."""
    choices = cfg.get("hydra", {}).get("runtime", {}).get("choices", {}) if "hydra" in cfg else {}
    graph = choices.get("graph") or cfg.graph.name
    encoder = choices.get("encoder") or cfg.encoder.name
    return f"python -m experiments.embed graph={graph} encoder={encoder}"


def key_problems(backbone) -> list[str]:
    """The API key a paid backbone (`ark.llm.client.BackboneConfig`) reads from the environment, if unset."""
    env = backbone.key_env()
    if backbone.provider in KEY_PROVIDERS and env and not os.environ.get(env):
        return [f"backbone {backbone.name!r} (provider {backbone.provider}) needs an API key: "
                f"export {env}=...  (or choose another backbone, e.g. backbone=local)"]
    return []


def server_problems(backbone, timeout_s: float = 5.0) -> list[str]:
    """The backbone's server, when it does not accept a connection (one line naming the URL). The
    ``local`` backbone is left out: the run starts llama.cpp itself when nothing answers on its port."""
    from ark.llm.transport import OPENAI_BASE_URL, connect_problem

    if backbone.provider in ("local", "rules"):   # local: the run starts it; rules: no server at all
        return []
    urls = backbone.base_url
    if urls is None and backbone.provider == "azure":
        urls = os.environ.get(backbone.endpoint_env)
    elif urls is None:
        urls = os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
    urls = [urls] if isinstance(urls, str) else [u for u in (urls or []) if u]
    if not urls:
        return []   # no endpoint at all: the key check names what is missing
    why = {url: connect_problem(url, timeout_s) for url in urls}
    if any(w is None for w in why.values()):   # replicas: the run goes on while one of them answers
        return []
    return [f"backbone {backbone.name!r}: cannot connect to {url} ({w}); start its server, or fix "
            "backbone.base_url" for url, w in why.items()]


def prerequisite_problems(cfg: DictConfig, source=None) -> list[str]:
    """What would stop this run before its first query: the input files of the graph source (e.g.
    STaRK's), the key of a paid backbone. Each problem says how to fix it; empty when the run can start."""
    source = instantiate(cfg.graph) if source is None else source
    problems = list(source.problems())
    if cfg.retriever.name == "ark":
        problems += key_problems(instantiate(cfg.backbone))
    if uses_encoder(cfg):
        from ark.search.embeddings import cache_problems

        encoder = instantiate(cfg.encoder.encoder)
        problems += encoder.problems()
        build = cfg.search.setup if uses_search(cfg) else cfg.retriever.build
        if not build.get("build_embeddings", True):
            problems += cache_problems(cfg.paths.index_cache or source.cache_dir, encoder, cfg.graph.name,
                                       embed_command(cfg))
    return problems


def check_prerequisites(cfg: DictConfig, source=None) -> None:
    """Fail before any work when `prerequisite_problems` finds any (the message names each fix), or,
    when all is there, when the backbone's server does not accept a connection (`server_problems`: asked
    by each job where it runs, not by `sweep_problems`, since a sweep's server may be reachable only from
    the nodes its jobs run on)."""
    problems = prerequisite_problems(cfg, source)
    if not problems and cfg.retriever.name == "ark":
        problems = server_problems(instantiate(cfg.backbone))
    if problems:
        raise SystemExit("the run cannot start:\n" + "\n".join(f"  - {p}" for p in problems))


def sweep_problems(overrides: Sequence[str]) -> list[str]:
    """The prerequisite problems of every point of the sweep ``overrides`` describes, each once, sorted."""
    from ark.config.compose import compose, sweep_points

    return sorted({p for point in sweep_points(list(overrides)) for p in prerequisite_problems(compose(point))})
