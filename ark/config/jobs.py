"""The Hydra jobs beside the evaluation run: a composed config -> plain objects -> one library call.

    from ark.config.compose import compose
    from ark.config import jobs
    jobs.embed(compose(["graph=demo", "encoder=minilm"]))              # experiments/embed.py
    jobs.diagnose(compose(["graph=demo"], config_name="diagnose"))     # ark diagnose, experiments/diagnose.py
    jobs.collect(compose(["experiment=collect", "graph=demo"]))        # experiments/collect.py
    jobs.distill(compose(["experiment=distill", "graph=prime"]))       # experiments/distill.py

- `embed`: the node-embedding cache a dense or hybrid run reads (`ark.search.embeddings.node_embeddings`);
- `diagnose`: the reachability ceiling of a query set, no LLM (`ark.analysis.reachability`), written to
  ``out_dir`` (conf/diagnose.yaml);
- `collect`: teacher trajectories for distillation (`ark.distill.collect`), conf/experiment/collect.yaml;
- `distill`: LoRA SFT of a student on them (`ark.distill.pipeline`), conf/experiment/distill.yaml.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ark.cost.prices import money


def embed(cfg: DictConfig):
    """Build (or reuse) the node embeddings of ``cfg``'s graph and encoder; returns them."""
    from ark.search.embeddings import node_embeddings

    source = instantiate(cfg.graph)
    encoder = instantiate(cfg.encoder.encoder)
    problems = list(source.problems()) + list(encoder.problems())
    if problems:
        raise SystemExit("cannot encode:\n" + "\n".join(f"  - {p}" for p in problems))
    emb = node_embeddings(source.graph(), encoder, cfg.paths.index_cache or source.cache_dir, build=True)
    print(f"{emb.path}: {emb.vectors.shape[0]:,} x {emb.dim} float32")
    return emb


def reach_settings(cfg: DictConfig):
    """The `ark.analysis.reachability.ReachSettings` of a composed conf/diagnose.yaml (its ``reach`` block)."""
    from ark.analysis.reachability import ReachSettings

    r = cfg.reach
    return ReachSettings(ks=tuple(r.ks), neighbors_k=int(r.neighbors_k), filters=tuple(r.filters))


def diagnose(cfg: DictConfig) -> dict:
    """Measure the reachability ceiling for a composed conf/diagnose.yaml; returns the summary (also
    written to ``out_dir``)."""
    from ark.analysis import reachability as R
    from ark.run.shards import select_queries

    settings = reach_settings(cfg)  # bad values fail here, before the graph loads
    source = instantiate(cfg.graph)
    problems = list(source.problems())
    if problems:
        raise SystemExit(f"graph {cfg.graph.name!r} cannot load:\n" + "\n".join(f"  - {p}" for p in problems))
    graph = source.graph()
    queries = select_queries(source.queries().split(cfg.split), cfg.limit)
    toolset = R.toolset_for(graph, instantiate(cfg.ablation.tools), settings, cfg.paths.index_cache)
    settings.check(toolset)
    rows, pools = R.reachability(toolset, queries, settings, progress=cfg.progress)
    info = {"graph": cfg.graph.name, "split": cfg.split, "limit": cfg.limit, "ablation": cfg.ablation.name,
            "tools": OmegaConf.to_container(cfg.ablation.tools, resolve=True)}
    summary = R.write(cfg.out_dir, rows, pools, settings, info)
    print(f"reachability of {cfg.graph.name}/{cfg.split}: {len(queries)} queries -> {cfg.out_dir}")
    print(R.markdown_table(summary, settings.neighbors_k))
    return summary


def collect(cfg: DictConfig) -> dict:
    """Build the teacher ARKRetriever from a composed config (``experiment=collect``) and collect its
    trajectories into ``out_dir``; returns the collection's summary."""
    from ark.config.retrievers import build_ark
    from ark.distill.collect import CollectConfig, acollect, teacher_settings
    from ark.llm.local_server import serving

    settings = CollectConfig(**OmegaConf.to_container(cfg.collect, resolve=True))
    source = instantiate(cfg.graph)
    graph = source.graph()
    agent, backbone = teacher_settings(instantiate(cfg.budget.agent), instantiate(cfg.backbone), settings)
    tools = instantiate(cfg.ablation.tools)
    retriever = build_ark(graph, backbone, agent, tools, llm_cache=cfg.paths.llm_cache,
                          index_cache=cfg.paths.index_cache)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    async def go() -> dict:
        try:
            return await acollect(retriever, source.queries().split(settings.split), out, settings)
        finally:
            await retriever.aclose()

    with serving(backbone):
        summary = asyncio.run(go())
    print(f"{out}: {summary['trajectories']} trajectories from {summary['queries_ok']}/{summary['queries']} queries, "
          f"{summary['prompt_tokens'] + summary['completion_tokens']:,} tokens, ${money(summary['cost_usd'])}"
          + ("  [rejection-sampled: USES LABELS]" if summary["uses_labels"] else ""))
    return summary


def distill(cfg: DictConfig):
    """Train the student of a composed config (``experiment=distill``: its ``distill`` block holds
    student / train / train_dirs / val_dirs / n_queries / teacher); returns the `TrainResult`."""
    from ark.distill.pipeline import distill as train_student
    from ark.distill.student import StudentConfig
    from ark.distill.train import DistillConfig

    d = OmegaConf.to_container(cfg.distill, resolve=True)
    result = train_student(StudentConfig(**d.get("student", {})), DistillConfig(**d.get("train", {})),
                           d["train_dirs"], d.get("val_dirs") or None, d.get("n_queries"), d.get("teacher", "gpt-4.1"),
                           d.get("graph", "?"), val_queries=d.get("val_queries"),
                           command=" ".join(["python", "experiments/distill.py", *sys.argv[1:]]))
    print(f"adapter: {result.adapter_dir}  steps {result.global_steps}  best val loss {result.best_eval_loss}  "
          f"{result.tokens_per_s:.0f} tokens/s")
    return result
