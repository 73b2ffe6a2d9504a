"""The settings check: every bad value of a composed run config, found before anything is read or written.

    from ark.config.checks import check_settings, setting_problems
    setting_problems(compose(["limit=-1", "metrics_mode=exact"]))
    # ["bad setting limit=-1: use a whole number >= 0, or null for the whole split",
    #  "bad setting metrics_mode='exact': choose one of paper, stark_qa, authors"]

Each problem is one line naming the value and the valid choices. The checks build nothing heavier than
the small config objects (graph source, backbone, agent, tool and search configs, encoder), whose own
constructors reject bad values, and read no file but a tables or RDF graph's queries table (its split
names, `split_problems`). `uses_search` and `uses_encoder` say which groups a run actually uses.
"""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ark.config.compose import one_line


def uses_search(cfg: DictConfig) -> bool:
    """Whether the run's search group (conf/search/) differs from the paper's lexical search: only the
    agent searches, and lexical search with BM25 neighbor ranking is what every run did before."""
    if cfg.retriever.name != "ark":
        return False
    c = cfg.search.setup.config
    return (c.get("mode", "lexical"), c.get("neighbor_rank", "bm25")) != ("lexical", "bm25")


def uses_encoder(cfg: DictConfig) -> bool:
    """Whether the run encodes text (conf/encoder/): a baseline built with an encoder (dense, hybrid),
    or the agent with a dense or hybrid search or neighbor ranking."""
    return "encoder" in cfg.retriever.build or uses_search(cfg)


def agent_options(agent_cfg) -> str:
    """The agent options (`ark.agent.OPTIONS`) switched on, comma-separated, or "none"."""
    from ark.agent import OPTIONS

    return ",".join(k for k in OPTIONS if agent_cfg.get(k, False)) or "none"


def setting_problems(cfg: DictConfig) -> list[str]:
    """Every bad setting of ``cfg``, one line each naming the value and the valid choices; empty when
    all are valid. Reads no file but the split names of a tables or RDF graph's queries, and builds
    nothing heavier than the small config objects."""
    from ark.analysis.metrics import MODES
    from ark.run import shards
    from ark.search.vectors import KINDS

    problems = []

    def bad(key: str, want: str) -> None:
        problems.append(f"bad setting {key}={OmegaConf.select(cfg, key)!r}: {want}")

    def is_int(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    try:
        source = instantiate(cfg.graph)
    except Exception as e:  # noqa: BLE001 - reported as a setting problem
        problems.append(f"bad setting in graph: {one_line(e)}")
        source = None
    problems += split_problems(cfg, source)
    problems += scoring_problems(cfg)
    if cfg.limit is not None and not (is_int(cfg.limit) and cfg.limit >= 0):
        bad("limit", "use a whole number >= 0, or null for the whole split")
    if cfg.get("shard") not in (None, ""):
        try:
            shards.parse_shard(str(cfg.shard))
        except ValueError:
            bad("shard", "use i/n with 0 <= i < n, e.g. shard=0/4")
    for key, low in (("concurrency", 1), ("n_boot", 0), ("retriever.top", 1)):
        v = OmegaConf.select(cfg, key)
        if not (is_int(v) and v >= low):
            bad(key, f"use a whole number >= {low}")
    if not is_int(cfg.seed):
        bad("seed", "use a whole number")
    if cfg.metrics_mode not in MODES:
        bad("metrics_mode", f"choose one of {', '.join(MODES)}")
    for key in ("count_failed_as_miss", "progress", "verbose"):
        if not isinstance(OmegaConf.select(cfg, key), bool):
            bad(key, "use true or false")
    keys = []
    if cfg.retriever.name == "ark":  # the agent's own checks, before any graph is loaded
        keys += ["backbone", "budget.agent", "ablation.tools", "search.setup.config"]
    if uses_encoder(cfg):
        keys.append("encoder.encoder")
    for key in keys:
        try:
            instantiate(OmegaConf.select(cfg, key))
        except Exception as e:  # noqa: BLE001 - reported as a setting problem
            problems.append(f"bad setting in {key}: {one_line(e)}")
    for key in ("search.setup.index_kind", "retriever.build.index_kind"):
        v = OmegaConf.select(cfg, key, default=None)
        if v is not None and v not in KINDS and (key.startswith("retriever") or uses_search(cfg)):
            bad(key, f"choose one of {', '.join(KINDS)}")
    if not any(p.startswith("bad setting in backbone") for p in problems):
        problems += spend_problems(cfg)
    return problems


def spend_problems(cfg: DictConfig) -> list[str]:
    """Bad values of the spending settings (``estimate``, ``confirm_usd``, ``max_cost_usd``, ...;
    `ark.config.plan`), and a paid backbone whose model has no price (`ark.cost.prices`) and none set."""
    problems = []
    if "estimate" not in cfg:   # a config without the spending settings (conf/diagnose.yaml)
        return problems

    def bad(key: str, want: str) -> None:
        problems.append(f"bad setting {key}={OmegaConf.select(cfg, key)!r}: {want}")

    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for key in ("estimate", "pilot", "yes"):
        if not isinstance(cfg.get(key), bool):
            bad(key, "use true or false")
    if not (isinstance(cfg.estimate_queries, int) and not isinstance(cfg.estimate_queries, bool)
            and cfg.estimate_queries >= 1):
        bad("estimate_queries", "use a whole number >= 1")
    if not (number(cfg.confirm_usd) and cfg.confirm_usd >= 0):
        bad("confirm_usd", "use a number of US$ >= 0")
    if cfg.max_cost_usd is not None and not (number(cfg.max_cost_usd) and cfg.max_cost_usd >= 0):
        bad("max_cost_usd", "use a number of US$ >= 0, or null for no cap")
    if cfg.retriever.name == "ark" and cfg.backbone.get("provider") in ("openai", "azure"):
        from ark.cost.prices import PRICES_AS_OF, resolve_price

        b = instantiate(cfg.backbone)
        try:
            resolve_price(b.provider, b.model, b.name, b.prices)
        except ValueError:
            problems.append(f"bad setting backbone.model={b.model!r}: ark/cost/prices.py (prices of {PRICES_AS_OF}) "
                            "has no price for it, and a paid run needs one: set backbone.price.input_per_m=... "
                            "backbone.price.output_per_m=... (US$ per 1M tokens)")
    return problems


def split_problems(cfg: DictConfig, source) -> list[str]:
    """``split`` against the splits the graph source has (`GraphSource.splits`: STaRK's and the demo's
    are known by name; a tables or RDF graph's are read from its queries file)."""
    if source is None:
        return []
    try:
        names = source.splits()
    except Exception as e:  # noqa: BLE001 - an unreadable queries file is a problem of this run's input
        return [f"bad setting split={cfg.split!r}: the splits of graph {source.name!r} cannot be read: {one_line(e)}"]
    if not names:
        return [f"bad setting split={cfg.split!r}: graph {source.name!r} has no queries (a tables or RDF graph "
                "reads them from a queries table beside its files)"]
    if cfg.split not in names:
        return [f"bad setting split={cfg.split!r}: choose one of {', '.join(names)} (the splits of graph {source.name!r})"]
    return []


def scoring_problems(cfg: DictConfig) -> list[str]:
    """How the run cuts and scores its lists (`ark.analysis.metrics`): ``cut`` and ``torchmetrics``."""
    from ark.analysis.metrics import CUTS, TORCHMETRICS

    problems = []
    if cfg.cut not in CUTS:
        problems.append(f"bad setting cut={cfg.cut!r}: choose one of {', '.join(CUTS)}")
    if str(cfg.torchmetrics) not in TORCHMETRICS:
        problems.append(f"bad setting torchmetrics={cfg.torchmetrics!r}: choose one of "
                        f"{', '.join(TORCHMETRICS)} (how stark_qa mode ranks; see ark/analysis/metrics.py)")
    return problems


def check_settings(cfg: DictConfig) -> None:
    """Stop with one line per bad setting before anything is read, loaded or written."""
    problems = setting_problems(cfg)
    if problems:
        raise SystemExit("\n".join(problems))
