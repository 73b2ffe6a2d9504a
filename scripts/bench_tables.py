"""Benchmark of the tables format (`ark.data.tables.source.TablesSource`) at MAG scale, against STaRK's files.

The synthetic MAG-shaped graph of `scripts/bench_graph.py` (1.9M nodes of 4 types, 40M stored edges of
4 relations, power-law degrees, 12-word texts) is written twice: as tables (``nodes.parquet``,
``edges.parquet`` with string ids such as ``"paper:123"``, ``queries.parquet``) and in STaRK's
processed MAG layout (``node_info.pkl`` with MAG's fields, ``edge_index.pt`` ...). Each phase runs in
a fresh Python process, which reports its own time and peak RSS:

* build from tables: the source ``graph=tables`` builds (``.graph(rebuild=True)``: read, check, map ids,
  documents, ``KnowledgeGraph.from_edges``, save the cache);
* build from STaRK files: ``StarkSource("mag").graph(rebuild=True)`` (torch.load + pickle, MAG's
  documents, the same build and save);
* the caches a sweep job reads, built once: the BM25 index (by the job's own ``build_ark``) and the
  resolved query sets;
* cold start of one sweep job from those caches, three times: a fresh process runs
  ``experiments/run.py``'s ``@hydra.main`` with a job's command line (``graph=tables ...
  backbone=scripted budget=t5_n1 limit=1``) against the scripted OpenAI-compatible server
  (`tests/helpers/scripted_server.py`), whose first reply is a ``search_graph`` call. The time counts from the
  process's first line until that call is answered (imports, Hydra's config, the checks, the graph,
  the BM25 index, the queries, the agent, the first LLM reply, the search); the library calls on the
  way are wrapped to stamp each step. Then one process running a sweep of three such jobs
  (``experiments/run.py -m``, Hydra's basic launcher), timed per job from Hydra composing its config;
  then three own-process jobs again with every LLM reply one second late, to show what the tools'
  numba warm-up hides. Target: < 2 s (every Hydra job of a sweep pays it); the report prints each
  step of the median job and the verdict for both kinds of job.

    python scripts/bench_tables.py                 # full scale: ~15 min, ~5 GiB peak (use the heavy lock)
    python scripts/bench_tables.py --scale 0.01    # quick run
    python scripts/bench_tables.py --keep && python scripts/bench_tables.py --cold-only   # cold starts again
    python scripts/bench_tables.py --reuse --keep --builds-only --build-rounds 3  # the builds, 3 rounds

Files go to ``--dir`` (default ``<ARK_HOME>/bench_tables``; several GB at full scale), removed afterwards
unless ``--keep``.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # a cold-start phase counts from here, before numpy or the entry point

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pickle  # noqa: E402
import runpy  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(ROOT))
from ark.home import ark_home  # noqa: E402
from bench_graph import NODE_TYPES, RELATIONS, peak_rss_gib, synthesize  # noqa: E402

MAG_NODE_TYPES = ["author", "institution", "field_of_study", "paper"]  # stark-qa's MagSKB order
N_QUERIES = 1000


def write_inputs(d: Path, scale: float, seed: int) -> dict:
    """Both input forms of the same synthetic graph under ``d/tables`` and ``d/stark_root/stark``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import torch

    t = time.perf_counter()
    node_types, names, texts, src, dst, rel = synthesize(scale, seed)
    n = len(node_types)
    out = {"nodes": n, "edges": len(src), "synthesize_s": time.perf_counter() - t}
    words = [x.split("- text: ", 1)[1] for x in texts]
    del texts
    type_names = np.array(NODE_TYPES, dtype=object)[node_types]

    t = time.perf_counter()
    tables = d / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    ids = pc.binary_join_element_wise(pa.array(type_names.tolist(), pa.string()),
                                      pc.cast(pa.array(np.arange(n)), pa.string()), ":")
    pq.write_table(pa.table({"id": ids, "type": pa.array(type_names.tolist()).dictionary_encode(),
                             "name": pa.array(names), "text": pa.array(words)}), tables / "nodes.parquet")
    rel_names = pa.array([r[0] for r in RELATIONS])
    pq.write_table(pa.table({"src": pc.take(ids, pa.array(src)), "dst": pc.take(ids, pa.array(dst)),
                             "relation": pa.DictionaryArray.from_arrays(pa.array(rel.astype(np.int32)), rel_names)}),
                   tables / "edges.parquet")
    rng = np.random.default_rng(seed)
    papers = np.flatnonzero(node_types == NODE_TYPES.index("paper"))
    answers = [pc.take(ids, pa.array(rng.choice(papers, size=int(rng.integers(1, 4)), replace=False))).to_pylist()
               for _ in range(N_QUERIES)]
    pq.write_table(pa.table({"id": np.arange(N_QUERIES), "query": [words[int(papers[i])] for i in range(N_QUERIES)],
                             "answers": answers, "split": ["test"] * N_QUERIES}), tables / "queries.parquet")
    out["write_tables_s"] = time.perf_counter() - t

    t = time.perf_counter()
    processed = d / "stark_root" / "stark" / "skb" / "mag" / "processed"
    processed.mkdir(parents=True, exist_ok=True)
    remap = np.array([MAG_NODE_TYPES.index(x) for x in NODE_TYPES], dtype=np.int64)
    torch.save(torch.from_numpy(np.stack([src, dst])), processed / "edge_index.pt")
    torch.save(torch.from_numpy(rel), processed / "edge_types.pt")
    torch.save(torch.from_numpy(remap[node_types]), processed / "node_types.pt")
    del src, dst, rel
    info = {}
    for i, (tname, name, text) in enumerate(zip(type_names.tolist(), names, words)):
        if tname == "paper":
            info[i] = {"type": "paper", "title": name, "abstract": text, "Date": -1}
        else:
            info[i] = {"type": tname, "DisplayName": f"{name} {text}", "PaperCount": -1, "CitationCount": -1}
    with open(processed / "node_info.pkl", "wb") as f:
        pickle.dump(info, f, protocol=pickle.HIGHEST_PROTOCOL)
    out["write_stark_s"] = time.perf_counter() - t
    out["size_tables_gib"] = sum(p.stat().st_size for p in tables.iterdir()) / 2**30
    out["size_stark_gib"] = sum(p.stat().st_size for p in processed.iterdir()) / 2**30
    out["write_peak_rss_gib"] = peak_rss_gib()
    return out


# --------------------------------------------------------------------------- child phases
def job_overrides(d: Path, run: str = "build") -> list[str]:
    """The command line of one sweep job over the tables graph (``python experiments/run.py ...``):
    ARK with the scripted backbone, one agent, the first test query."""
    return ["graph=tables", f"graph.path={d / 'tables'}", "graph.name=bench_tables", "graph.candidate_types=[paper]",
            f"paths.data={d / 'tables_root'}", f"paths.runs={d / 'runs' / run}",
            f"paths.llm_cache={d / 'runs' / run}/llm-" + "${experiment_name}.sqlite", "retriever=ark", "backbone=scripted",
            "budget=t5_n1", "limit=1", "progress=false", "n_boot=10"]


def job_source(d: Path):
    """The graph source exactly as the job's config builds it."""
    from hydra.utils import instantiate

    from ark.config.compose import compose

    return instantiate(compose(job_overrides(d)).graph)


def _timed_build(source) -> dict:
    """Build ``source``'s graph, timing the wall clock and the process's CPU time (all its threads: on a
    shared machine the CPU time moves less with other jobs' load than the wall time does)."""
    t, c = time.perf_counter(), time.process_time()
    g = source.graph(rebuild=True)
    return {"build_s": time.perf_counter() - t, "build_cpu_s": time.process_time() - c, "peak_rss_gib": peak_rss_gib(),
            "nodes": g.num_nodes, "edges": g.num_edges, "candidates": len(g.candidate_ids)}


def phase_build_tables(d: Path) -> dict:
    return _timed_build(job_source(d))


def phase_build_stark(d: Path) -> dict:
    from ark.data.sources import StarkSource

    return _timed_build(StarkSource("mag", root=d / "stark_root"))


def phase_index(d: Path) -> dict:
    """The caches a sweep job finds: the BM25 index (built where the job's ``build_ark`` looks for it) and
    whatever the source caches beside the graph (resolved query sets)."""
    from hydra.utils import instantiate

    from ark.config.compose import compose

    cfg = compose(job_overrides(d))
    source = instantiate(cfg.graph)
    g = source.graph()
    t = time.perf_counter()
    instantiate(cfg.retriever.build)(graph=g)
    out = {"index_s": time.perf_counter() - t}
    t = time.perf_counter()
    source.queries()
    out["queries_s"] = time.perf_counter() - t
    out["peak_rss_gib"] = peak_rss_gib()
    return out


SWEEP_JOBS = 3


def phase_cold(d: Path, sweep: bool = False) -> dict:
    """Sweep jobs in a fresh process, each until its agent's first ``search_graph`` call is answered
    (the run then finishes its query). ``sweep=False``: ``python experiments/run.py <job>``, one job that
    pays everything from the interpreter's start (a job of a Slurm/submitit sweep is such a process);
    ``sweep=True``: ``python experiments/run.py -m <job> experiment_name=j0,j1,j2``, whose jobs run one
    after another in this process with Hydra's basic launcher (each composes its config, builds its
    source, loads graph, index and queries; imports are paid once). The library calls on the way are
    wrapped, not replaced, to stamp when each step finished, in seconds since the job began (the first
    line of this process, or Hydra composing the job's config)."""
    jobs: list[dict] = []
    starts: list[float] = []

    def begin(start: float) -> None:
        if jobs and "checks" not in jobs[-1]:   # Hydra's sweeper composed a job only to validate it
            jobs.pop()
            starts.pop()
        jobs.append({})
        starts.append(start)

    def stamp(key: str) -> None:
        jobs[-1].setdefault(key, time.perf_counter() - starts[-1])

    if not sweep:
        begin(_T0)
    import ark.data.sources
    import ark.search.bm25
    import ark.tools

    if not sweep:
        stamp("imports (ark's graph, index and tool modules)")

    def wrap(owner, name: str, key: str | None, before: str | None = None, start: bool = False):
        real = getattr(owner, name)

        def timed(*args, **kwargs):
            if start:
                begin(time.perf_counter())
            if before:
                stamp(before)
            out = real(*args, **kwargs)
            if key:
                stamp(key)
            return out

        setattr(owner, name, timed)

    import hydra._internal.hydra
    import hydra.main  # noqa: F401  (the module, in sys.modules; `hydra.main` the attribute is the decorator)

    if sweep:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl

        wrap(ConfigLoaderImpl, "load_sweep_config", "Hydra config", start=True)
    else:  # Hydra composes the config twice: once for its mode, once for the run
        wrap(sys.modules["hydra.main"], "_run_hydra", None, before="entry point's imports")
        wrap(hydra._internal.hydra.Hydra, "run", None, before="Hydra config (mode)")
        wrap(hydra._internal.hydra, "run_job", None, before="Hydra config (run)")
    wrap(ark.data.sources.GraphSource, "graph", "graph", before="checks")
    wrap(ark.search.bm25, "load_index", "bm25")
    wrap(ark.data.sources.GraphSource, "queries", "queries")
    import ark.llm.client

    real_chat = ark.llm.client.LLMClient.chat

    async def chat(client, *args, **kwargs):
        out = await real_chat(client, *args, **kwargs)
        stamp("first LLM reply")
        return out

    ark.llm.client.LLMClient.chat = chat
    answers: list[dict] = []
    real_call = ark.tools.ToolSet.call

    def call(toolset, name, arguments):
        out = real_call(toolset, name, arguments)
        if name == ark.tools.SEARCH and "first_search" not in jobs[-1]:
            stamp("first_search")
            answers.append({"error": out.error, "hits": len(out.node_ids)})
        return out

    ark.tools.ToolSet.call = call
    entry = ROOT / "experiments" / "run.py"
    run = f"cold-{os.getpid()}"
    names = ["-m", "experiment_name=" + ",".join(f"j{i}" for i in range(SWEEP_JOBS))] if sweep else []
    sys.argv = [str(entry), *names, *job_overrides(d, run)]
    sys.path[0] = str(entry.parent)   # as `python experiments/run.py` starts
    with contextlib.redirect_stdout(sys.stderr):
        try:
            runpy.run_path(str(entry), run_name="__main__")
        except SystemExit as e:   # the entry point ends with its exit status (3: a run not complete)
            if e.code not in (0, None):
                raise RuntimeError(f"experiments/run.py exited with {e.code}") from e
    want = SWEEP_JOBS if sweep else 1
    if len(answers) != want or any(a["error"] or not a["hits"] for a in answers):
        raise RuntimeError(f"not every job's first search_graph call answered: {answers}, marks {jobs}")
    out = {"jobs": [{"marks_s": m, "total_s": m["first_search"]} for m in jobs], "peak_rss_gib": peak_rss_gib()}
    if sweep:
        out["process_to_first_job_s"] = starts[0] - _T0
    return out


def write_vocab(d: Path, n_tokens: int) -> None:
    """A vocabulary of ``n_tokens`` tokens saved both ways: bm25s' JSON dict and `HashedVocab`'s arrays."""
    from ark.search.bm25 import HashedVocab

    vocab = {f"t{i:07d}x": i for i in range(n_tokens)}
    (d / "vocab").mkdir(parents=True, exist_ok=True)
    (d / "vocab" / "vocab.index.json").write_text(json.dumps(vocab))
    hashes, ids = HashedVocab.arrays(vocab)
    np.save(d / "vocab" / "vocab.hash.npy", hashes)
    np.save(d / "vocab" / "vocab.ids.npy", ids)


def phase_vocab_json(d: Path) -> dict:
    t = time.perf_counter()
    with open(d / "vocab" / "vocab.index.json") as f:
        vocab = json.load(f)   # what bm25s.BM25.load does with load_vocab=True
    found = "t0000042x" in vocab
    return {"load_s": time.perf_counter() - t, "found": found}


def phase_vocab_hash(d: Path) -> dict:
    from ark.search.bm25 import HashedVocab

    t = time.perf_counter()
    vocab = HashedVocab(np.load(d / "vocab" / "vocab.hash.npy", mmap_mode="r"),
                        np.load(d / "vocab" / "vocab.ids.npy", mmap_mode="r"))
    found = "t0000042x" in vocab
    return {"load_s": time.perf_counter() - t, "found": found}


PHASES = {"build-tables": phase_build_tables, "build-stark": phase_build_stark, "index": phase_index,
          "cold": phase_cold, "sweep": lambda d: phase_cold(d, sweep=True), "vocab-json": phase_vocab_json, "vocab-hash": phase_vocab_hash}


def _child(phase: str, d: Path, env: dict | None = None) -> dict:
    t = time.perf_counter()
    res = subprocess.run([sys.executable, __file__, "--phase", phase, "--dir", str(d)], capture_output=True,
                         text=True, check=False, env={**os.environ, **(env or {})})
    if res.returncode != 0:
        raise RuntimeError(f"phase {phase} failed:\n{res.stderr[-4000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = time.perf_counter() - t
    return out


def run(args) -> dict:
    d = args.dir
    out = {"scale": args.scale}
    if args.vocab_only:
        write_vocab(d, int(1_900_000 * args.scale))
        out["vocab"] = {k: [_child(f"vocab-{k}", d) for _ in range(3)] for k in ("json", "hash")}
        return out
    if not args.cold_only:
        if not (args.reuse and (d / "tables" / "nodes.parquet").exists()):
            shutil.rmtree(d, ignore_errors=True)
            out["write"] = write_inputs(d, args.scale, args.seed)
            print(f"inputs written: {json.dumps(out['write'])}", flush=True)
        out["tables"], out["stark"] = [], []
        for _ in range(args.build_rounds):   # alternating, so both see the same machine load
            out["tables"].append(_child("build-tables", d))
            print(f"build from tables: {json.dumps(out['tables'][-1])}", flush=True)
            out["stark"].append(_child("build-stark", d))
            print(f"build from STaRK files: {json.dumps(out['stark'][-1])}", flush=True)
        if args.builds_only:
            return out
        out["index"] = _child("index", d)
        print(f"BM25 index: {json.dumps(out['index'])}", flush=True)
    out["cold"] = cold_starts(d, args.cold_runs, args.llm_latency)
    print(f"cold starts: {json.dumps(out['cold'])}", flush=True)
    return out


def cold_starts(d: Path, n: int, latency_s: float = 1.0) -> dict:
    """``n`` jobs, each a fresh process, then one process running a sweep of `SWEEP_JOBS` jobs, against
    the scripted LLM server: its first reply to an agent is a ``search_graph`` call with the question,
    the second ``finish``. Then ``n`` jobs again with every reply ``latency_s`` late, as an API's are:
    how long after its first reply the job answers the search shows what the tools' warm-up hides."""
    from tests.helpers.scripted_server import ScriptedServer, first_user_message, tool_reply

    def responder(request: dict):
        asked = any(m.get("role") == "assistant" for m in request.get("messages", []))
        if asked:
            return tool_reply(("finish", {}))
        return tool_reply(("search_graph", {"query": first_user_message(request) or "paper"}))

    shutil.rmtree(d / "runs", ignore_errors=True)
    with ScriptedServer(responder=responder) as server:
        env = {"ARK_SCRIPTED_URL": server.base_url}
        runs = [_child("cold", d, env=env) for _ in range(n)]
        sweep = _child("sweep", d, env=env)
        if server.calls < 2 * (n + SWEEP_JOBS):
            raise RuntimeError(f"the scripted server answered {server.calls} requests for {n + SWEEP_JOBS} jobs")
    with ScriptedServer(responder=responder, latency_s=latency_s) as server:
        slow = [_child("cold", d, env={"ARK_SCRIPTED_URL": server.base_url}) for _ in range(n)]
    shutil.rmtree(d / "runs", ignore_errors=True)
    return {"single": runs, "sweep": sweep, "slow_llm": slow, "llm_latency_s": latency_s}


def report(r: dict) -> None:
    if "vocab" in r:
        j = np.median([x["load_s"] for x in r["vocab"]["json"]])
        h = np.median([x["load_s"] for x in r["vocab"]["hash"]])
        print(f"vocabulary of {int(1_900_000 * r['scale']):,} tokens, opened and one lookup (median of 3): "
              f"bm25s' JSON {j:.3f} s, hashed arrays {h * 1e3:.1f} ms ({j / h:.0f}x)")
        return
    if "tables" in r:
        report_build(r)
    if "cold" in r:
        report_cold(r["cold"])


def report_build(r: dict) -> None:
    ts, ss = r["tables"], r["stark"]
    t0 = ts[0]
    med = lambda rows, key: float(np.median([x[key] for x in rows]))  # noqa: E731
    print()
    print(f"== bench_tables: scale {r['scale']}: {t0['nodes']:,} nodes, {t0['edges']:,} stored edges "
          f"({t0['candidates']:,} candidates); medians of {len(ts)} alternating builds each")
    print(f"{'build':<28}{'wall':>10}{'CPU':>10}{'peak RSS':>12}   wall of each build")
    for label, rows in (("from tables (parquet)", ts), ("from STaRK files", ss)):
        print(f"{label:<28}{med(rows, 'build_s'):>9.1f}s{med(rows, 'build_cpu_s'):>9.1f}s"
              f"{med(rows, 'peak_rss_gib'):>10.2f} GiB   " + ", ".join(f"{x['build_s']:.1f}" for x in rows))
    print(f"tables / STaRK: wall {med(ts, 'build_s') / med(ss, 'build_s'):.2f}x, CPU "
          f"{med(ts, 'build_cpu_s') / med(ss, 'build_cpu_s'):.2f}x, peak memory "
          f"{med(ts, 'peak_rss_gib') / med(ss, 'peak_rss_gib'):.2f}x; per round: "
          + ", ".join(f"{a['build_s'] / b['build_s']:.2f}x" for a, b in zip(ts, ss)))
    if "index" in r:
        print(f"BM25 index build (once): {r['index']['index_s']:.1f} s")


TARGET_S = 2.0


def _steps(marks: dict) -> str:
    prev, out = 0.0, []
    for k, v in sorted(marks.items(), key=lambda kv: kv[1]):
        out.append(f"{k} {v - prev:.3f}")
        prev = v
    return ", ".join(out)


def report_cold(cold: dict) -> None:
    """The cold-start breakdown (time of each step) and the verdict against the target, for a job that is
    a process of its own and for the jobs of a sweep that share one process."""
    single = [c["jobs"][0] | {"process_wall_s": c["process_wall_s"]} for c in cold["single"]]
    totals = [c["total_s"] for c in single]
    median = sorted(single, key=lambda c: c["total_s"])[len(single) // 2]
    print(f"cold start of one job, a process of its own (python experiments/run.py graph=tables ...; caches on "
          f"disk), until its first search_graph is answered: median {np.median(totals):.2f} s of {len(single)} "
          f"(runs {', '.join(f'{x:.2f}' for x in totals)}); whole process incl. interpreter start and the rest "
          f"of the run {np.median([c['process_wall_s'] for c in single]):.2f} s")
    print(f"  steps of the median job (s): {_steps(median['marks_s'])}")
    print(f"  graph and BM25 index loaded, tools built: {np.median([c['marks_s']['bm25'] for c in single]):.2f} s "
          f"(median); the rest is the agent's first LLM round trip and numba's first-call set-up")
    sweep = cold["sweep"]["jobs"]
    print(f"jobs of one sweep process (python experiments/run.py -m ..., basic launcher): interpreter start to "
          f"the first job {cold['sweep']['process_to_first_job_s']:.2f} s, then per job until its first "
          f"search_graph is answered: {', '.join('%.2f' % j['total_s'] for j in sweep)} s")
    for i, j in enumerate(sweep):
        print(f"  job {i} steps (s): {_steps(j['marks_s'])}")
    slow = [c["jobs"][0]["marks_s"] for c in cold["slow_llm"]]
    after = [m["first_search"] - m["first LLM reply"] for m in slow]
    fast_after = [c["marks_s"]["first_search"] - c["marks_s"]["first LLM reply"] for c in single]
    print(f"first search_graph answered after the job's first LLM reply (the tools' numba warm-up runs "
          f"meanwhile): {np.median(fast_after):.3f} s with replies at once, {np.median(after):.3f} s with replies "
          f"{cold['llm_latency_s']:.1f} s late (median of {len(after)}; total to the answer "
          f"{np.median([m['first_search'] for m in slow]):.2f} s)")
    own = np.median(totals)
    later = float(np.median([j["total_s"] for j in sweep[1:]]))
    for what, v in (("a job in a process of its own", own), ("a later job of a sweep process", later)):
        print(f"  target < {TARGET_S:.0f} s for {what}: {'MET' if v < TARGET_S else 'NOT MET'} "
              f"({v:.2f} s, {v / TARGET_S:.2f}x the target)")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dir", type=Path, default=ark_home() / "bench_tables")
    p.add_argument("--keep", action="store_true", help="keep the files")
    p.add_argument("--reuse", action="store_true", help="reuse the inputs under --dir")
    p.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--cold-only", action="store_true",
                   help="only the cold starts, from the inputs and caches a --keep run left under --dir")
    p.add_argument("--cold-runs", type=int, default=3, help="sweep jobs to time (default 3)")
    p.add_argument("--llm-latency", type=float, default=1.0,
                   help="seconds the scripted server waits before each reply in the last set of jobs (default 1)")
    p.add_argument("--build-rounds", type=int, default=1,
                   help="build from tables and from STaRK files this many times each, alternating (default 1)")
    p.add_argument("--builds-only", action="store_true", help="only the two builds (no BM25 index, no cold starts)")
    p.add_argument("--vocab-only", action="store_true",
                   help="only time opening a BM25 vocabulary: bm25s' JSON vs the memory-mapped hash arrays")
    args = p.parse_args(argv)
    if args.phase:
        print(json.dumps(PHASES[args.phase](args.dir)))
        return
    try:
        r = run(args)
        report(r)
        if args.json:
            args.json.write_text(json.dumps(r, indent=1))
    finally:
        if not (args.keep or args.cold_only):
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
