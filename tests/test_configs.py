"""Every Hydra option composes and instantiates; every experiment and every point of its sweep composes."""

import functools
from pathlib import Path

import pytest
from hydra.utils import get_class, instantiate

from ark.data.sources import StarkSource
from ark.config.compose import compose, sweep_points
from ark.config.identity import run_info
from ark.config.location import option_names

GROUPS = ("graph", "backbone", "budget", "ablation", "search", "encoder", "retriever", "logger")


@functools.lru_cache(maxsize=None)
def composed(point: tuple[str, ...]):
    return compose(list(point))


@functools.lru_cache(maxsize=None)
def points(*overrides: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(p) for p in sweep_points(list(overrides)))


def options(group: str) -> list[str]:
    return option_names(group)


def test_groups_have_the_promised_options():
    assert set(options("graph")) == {"amazon", "mag", "prime", "demo", "tables", "rdf"}
    assert {"gpt-4.1", "gpt-4o", "gpt-4.1-azure", "qwen3-4b", "qwen3-8b", "student", "local",
            "scripted"} <= set(options("backbone"))
    assert set(options("ablation")) == {"full", "no_neighbors", "no_query_rank", "no_type_filter", "paging", "paths"}
    assert set(options("retriever")) == {"ark", "bm25", "dense", "hybrid"}
    assert set(options("search")) == {"lexical", "dense", "hybrid"}
    assert set(options("encoder")) == {"minilm", "openai-3-small", "ada-002"}
    assert set(options("logger")) == {"none", "wandb"}
    assert {"table1", "ablation", "budget_heatmap", "backbones"} <= set(options("experiment"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes_and_instantiates(group, option):
    cfg = compose([f"{group}={option}"])
    assert cfg[group] is not None
    if group == "budget":
        agent = instantiate(cfg.budget.agent)
        # t<T_max>_n<agents>, and a suffix for a budget that also changes the tools (t4_n1-compact)
        assert cfg.budget.name.split("-")[0] == f"t{agent.t_max}_n{agent.n_agents}"
    elif group == "ablation":
        tools = instantiate(cfg.ablation.tools)
        assert (tools.search_k, tools.neighbors_k) == (cfg.budget.search_k, cfg.budget.neighbors_k)
    elif group == "retriever":
        build = instantiate(cfg.retriever.build)            # a partial: everything but the graph
        assert callable(build) and cfg.retriever.top in (20, 100)
    else:
        obj = instantiate(cfg[group])
        if group in ("graph", "backbone"):
            assert obj.name == cfg[group].name
    assert cfg.out_dir == f"results/runs/default/{cfg.graph.name}/{cfg.retriever.run_name}_test"


def test_ablation_toggles_reach_the_tool_config():
    flags = {o: instantiate(compose([f"ablation={o}"]).ablation.tools) for o in options("ablation")}
    assert flags["full"].neighbors and flags["full"].neighbor_query and flags["full"].type_filter
    assert not flags["no_neighbors"].neighbors
    assert not flags["no_query_rank"].neighbor_query and flags["no_query_rank"].neighbors
    assert not flags["no_type_filter"].type_filter


@pytest.mark.parametrize("launcher", ["basic", "joblib", "submitit_slurm", "slurm", "local_parallel"])
def test_launchers_compose(launcher):
    cfg = compose([f"hydra/launcher={launcher}"])
    assert get_class(cfg.hydra.launcher._target_).__name__.endswith("Launcher")


# collect and distill (and the student's collect_student, distill_student) are single jobs of their own entry
# points (experiments/collect.py, distill.py)
SWEEPS = [e for e in options("experiment") if not e.startswith(("collect", "distill"))]


@pytest.mark.parametrize("experiment", SWEEPS)
@pytest.mark.commands
def test_every_experiment_and_sweep_point_composes(experiment):
    grid = points(f"experiment={experiment}")
    assert len(grid) > 1
    dirs = set()
    for point in grid:
        cfg = composed(point)
        assert cfg.experiment_name == experiment
        for group in ("graph", "backbone", "logger"):
            instantiate(cfg[group])
        instantiate(cfg.retriever.build)
        info = run_info(cfg)
        assert Path(cfg.out_dir) == Path("results/runs") / experiment / info["graph"] / f"{info['run_name']}_{info['split']}"
        dirs.add(cfg.out_dir)
    assert len(dirs) == len(grid) - (3 if experiment == "table1" else 0)   # BM25 twice per graph
    # shrunk: the same experiment on the demo graph with the local/scripted backbone
    small = points(f"experiment={experiment}", "graph=demo", "backbone=scripted", "limit=2")
    assert all(composed(p).graph.name == "demo" and composed(p).limit == 2 for p in small)
    assert len(small) < len(grid)


def test_sweeps_of_the_command_line_join_the_experiments():
    assert points("retriever=bm25", "split=test,val") == (("retriever=bm25", "split=test"),
                                                          ("retriever=bm25", "split=val"))
    grid = points("experiment=table1", "graph=demo", "limit=2,3")
    assert len(grid) == 2 * 2 * 2 and {p[-1] for p in grid} == {"limit=2", "limit=3"}   # retriever x backbone x limit
    assert all("graph=demo" in p for p in grid)                                        # the command line wins


@pytest.mark.commands   # composes every point of every experiment grid (seconds): with the other compositions there
def test_experiment_grids_match_the_paper():
    t1 = {tuple(sorted(run_info(composed(p)).items())) for p in points("experiment=table1")}
    runs = [dict(x) for x in t1]
    assert {r["graph"] for r in runs} == {"amazon", "mag", "prime"} and all(r["split"] == "test" for r in runs)
    assert {(r["retriever"], r["backbone"]) for r in runs} == {("ark", "gpt-4.1"), ("ark", "gpt-4o"), ("bm25", None)}
    abl = [run_info(composed(p)) for p in points("experiment=ablation")]
    assert len(abl) == 12 and all(r["split"] == "test-0.1" and r["backbone"] == "gpt-4.1" for r in abl)
    heat = [run_info(composed(p)) for p in points("experiment=budget_heatmap")]
    assert {r["budget"] for r in heat} >= {"t20_n3", "t5_n1"} and len(heat) == 27
    bb = {run_info(composed(p))["backbone"] for p in points("experiment=backbones")}
    assert bb == {"gpt-4.1", "qwen3-4b", "qwen3-8b", "qwen3-4b-600", "qwen3-4b-6000", "qwen3-8b-600",
                  "qwen3-8b-6000"}


def test_bad_names_list_the_choices():
    with pytest.raises(ValueError, match="unknown STaRK graph 'wikidata'; valid STaRK graphs: amazon, mag, prime"):
        StarkSource(name="wikidata")
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="gpt-4o"):
        compose(["backbone=gpt-5"])


def test_distillation_experiments_carry_the_papers_settings():
    col = compose(["experiment=collect", "graph=prime"])
    assert col.backbone.name == "gpt-4.1" and col.split == "train"
    assert (col.collect.n_queries, col.collect.trajectories_per_query, col.collect.temperature,
            col.collect.t_max, col.collect.select) == (6000, 3, 0.7, 20, "all")
    dis = compose(["experiment=distill", "graph=prime"])
    t = dis.distill.train
    assert dis.distill.student.model == "Qwen/Qwen3-8B" and dis.distill.student.enable_thinking is False
    assert (t.epochs, t.max_length, t.learning_rate, t.lora_r, t.lora_alpha, t.lora_dropout) == (1, 16384, 1e-5, 32, 64, 0.1)
    assert dis.distill.train_dirs == ["results/runs/collect-train/prime/ark-gpt-4.1-t20_n3-full_train"]
    assert col.out_dir == dis.distill.train_dirs[0]  # distill reads what collect writes


def test_the_config_location_is_the_checkout_or_the_package(tmp_path, monkeypatch):
    from ark.config import location

    assert location.conf_dir() == Path(__file__).resolve().parents[1] / "conf"   # this checkout's conf/
    pkg = tmp_path / "site" / "ark"
    (pkg / "conf").mkdir(parents=True)
    monkeypatch.setattr(location, "_PACKAGE", pkg)
    assert location.conf_dir() == tmp_path / "site" / "conf"     # an empty ark/conf/ is not a config folder
    (pkg / "conf" / "config.yaml").write_text("x: 1\n")
    assert location.conf_dir() == pkg / "conf"                   # configs shipped inside the package win
    with pytest.raises(FileNotFoundError, match=r"no diagnose\.yaml in .*site/ark/conf: this copy of ark has no configs; install it with pip install \."):
        compose([], config_name="diagnose")


def test_every_environment_variable_the_configs_name_is_read():
    """An ARK_* variable a config file names (its comments included) is one that a config reads with
    ${oc.env:...} or that the package reads (its name a string in ark/): none is named and then ignored,
    as ARK_VLLM_URL once was in conf/experiment/backbones.yaml."""
    import re

    repo = Path(__file__).resolve().parents[1]
    confs = {p: p.read_text() for p in (repo / "conf").rglob("*.yaml")}
    named = {m for text in confs.values() for m in re.findall(r"\bARK_[A-Z0-9_]+\b", text)}
    read = {m for text in confs.values() for m in re.findall(r"\$\{oc\.env:(ARK_[A-Z0-9_]+)", text)}
    code = " ".join(p.read_text() for p in (repo / "ark").rglob("*.py"))
    read |= {m for m in named if re.search(rf"[\"']{m}[\"']", code)}
    assert {"ARK_LOCAL_URL", "ARK_VLLM_URL_QWEN3_8B", "ARK_VLLM_URL_QWEN3_4B", "ARK_HOME"} <= named
    assert named <= read, f"named in conf/ but read nowhere: {sorted(named - read)}"
