"""scripts/compare_local_options.py composes one valid run per variant: the demo's small toolset, the
options switched exactly as the variant names them, and a run directory of its own."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest
from hydra.utils import instantiate

from ark.config.compose import compose
from ark.config.identity import run_info

ROOT = Path(__file__).resolve().parents[1]


def test_each_variant_composes_its_own_run():
    spec = importlib.util.spec_from_file_location("compare_local_options", ROOT / "scripts" / "compare_local_options.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = argparse.Namespace(limit=3, t_max=4, n_agents=1)
    dirs = set()
    variants = {**mod.VARIANTS, "first_search+stop_on_repeat": ("first_search", "stop_on_repeat")}
    for variant, on in variants.items():
        cfg = compose(mod.overrides(variant, args))
        agent, tools = instantiate(cfg.budget.agent), instantiate(cfg.ablation.tools)
        assert {o for o in mod.OPTIONS if getattr(agent, o)} == set(on)
        assert (agent.t_max, agent.n_agents, cfg.limit, cfg.backbone.name) == (4, 1, 3, "local")
        assert (tools.neighbors_k, tools.max_observation_tokens, tools.snippet_chars) == (10, 600, 100)
        assert run_info(cfg)["agent_options"] == (",".join(on) or "none")
        dirs.add(cfg.out_dir)
    assert len(dirs) == len(variants)
    named = compose(mod.overrides("first_search", args, "exact"))
    assert instantiate(named.search.setup.config).name_first == "exact" and named.out_dir not in dirs
    for bad in ("first_search+nope", "fast"):
        with pytest.raises(ValueError):
            mod.options_of(bad)
