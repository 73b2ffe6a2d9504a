"""Benchmark of the graph store (`ark.data.graph.KnowledgeGraph`) on a synthetic graph at MAG scale.

Builds a random graph shaped like STaRK's MAG (1.9M nodes of 4 types, 40M stored edges of 4 relations,
power-law degrees, short synthetic texts), then measures, in one run:

* build: ``KnowledgeGraph.from_edges`` + ``save`` time, peak RSS of the building process;
* load: ``KnowledgeGraph.load`` (memory-mapped cache) vs. loading the same graph the way stark-qa does
  (``torch.load`` of ``edge_index.pt``/``edge_types.pt``/``node_types.pt`` + ``pickle`` of
  ``node_info.pkl`` and the type dicts); each load runs in a fresh Python process (page cache warm for
  both), which also reports its own peak RSS. Target: cache >= 10x faster.
* filtered-neighbor latency p50/p99 (node-type and relation filters) on random nodes and on every node
  of degree >= 10k (up to ``--hubs``). Target: p99 < 1 ms.

    python scripts/bench_graph.py                # full scale (a few minutes, ~6 GiB peak while building)
    python scripts/bench_graph.py --scale 0.1    # quick run
    python scripts/bench_graph.py --dir /tmp/bench_graph --keep   # then --reuse: measure again, no build

Files go to ``--dir`` (default ``<ARK_HOME>/bench_graph``, about 2.5 GB at full scale) and are removed
afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

NODE_TYPES = ("paper", "author", "institution", "field_of_study")
# Node counts per type at scale 1 (STaRK MAG: ~1.87M nodes in all).
NODES = {"paper": 700_000, "author": 1_100_000, "institution": 10_000, "field_of_study": 90_000}
# (relation, source type, target type, stored edges at scale 1): 40M in all.
RELATIONS = (
    ("author___affiliated_with___institution", "author", "institution", 2_000_000),
    ("paper___cites___paper", "paper", "paper", 16_000_000),
    ("paper___has_topic___field_of_study", "paper", "field_of_study", 10_000_000),
    ("author___writes___paper", "author", "paper", 12_000_000),
)
HUB_DEGREE = 10_000
REPEATS = 5  # warm neighbor calls timed per node and filter (their median is reported)
EXPONENT = 0.6  # rank-frequency exponent of the power law (P(rank <= r) ~ r^(1 - EXPONENT))


def _status_gib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def peak_rss_gib() -> float:
    """Peak resident set size of this process so far. ``VmHWM`` is per process image (getrusage's
    ru_maxrss would carry the parent's peak into a child started by fork + exec)."""
    peak = _status_gib("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def rss_gib() -> float:
    """Resident set size of this process now (``VmRSS``; NaN where /proc is not there)."""
    now = _status_gib("VmRSS")
    return now if now is not None else float("nan")


def _power_law_ids(rng: np.random.Generator, start: int, n: int, size: int, perm: np.ndarray) -> np.ndarray:
    """``size`` node ids in ``start..start+n-1``, rank r drawn with P(rank <= r) = (r / n)^(1 - EXPONENT);
    ``perm`` maps rank to id so hubs are spread over the id range."""
    rank = (n * rng.random(size) ** (1.0 / (1.0 - EXPONENT))).astype(np.int64)
    np.minimum(rank, n - 1, out=rank)
    return start + perm[rank]


def synthesize(scale: float, seed: int):
    """Node types, names, texts and stored edges (src, dst, rel) of the synthetic MAG-like graph."""
    rng = np.random.default_rng(seed)
    counts = {t: max(10, int(NODES[t] * scale)) for t in NODE_TYPES}
    starts, node_types, offset = {}, [], 0
    for k, t in enumerate(NODE_TYPES):
        starts[t] = offset
        node_types.append(np.full(counts[t], k, dtype=np.int32))
        offset += counts[t]
    node_types = np.concatenate(node_types)
    n = offset
    perms = {t: rng.permutation(counts[t]) for t in NODE_TYPES}
    src_parts, dst_parts, rel_parts = [], [], []
    for r, (_, s_type, d_type, m) in enumerate(RELATIONS):
        m = max(10, int(m * scale))
        src_parts.append(_power_law_ids(rng, starts[s_type], counts[s_type], m, perms[s_type]))
        dst_parts.append(_power_law_ids(rng, starts[d_type], counts[d_type], m, perms[d_type]))
        rel_parts.append(np.full(m, r, dtype=np.int64))
    src, dst, rel = np.concatenate(src_parts), np.concatenate(dst_parts), np.concatenate(rel_parts)
    del src_parts, dst_parts, rel_parts
    vocab = [f"w{i:04d}" + "abcdefghij"[i % 10] * (1 + i % 5) for i in range(4096)]
    names = [f"{NODE_TYPES[t]} {i}" for i, t in enumerate(node_types.tolist())]
    texts: list[str] = []
    for lo in range(0, n, 100_000):  # in chunks: a full list of word ids would cost ~1 GiB of ints
        words = rng.integers(0, len(vocab), size=(min(n, lo + 100_000) - lo, 12), dtype=np.int32).tolist()
        texts.extend(f"- name: {name}\n- text: " + " ".join(vocab[w] for w in row)
                     for name, row in zip(names[lo:], words))
    return node_types, names, texts, src, dst, rel


def write_stark_files(d: Path, node_types, names, texts, src, dst, rel) -> None:
    """The same graph in stark-qa's processed layout (tensors via torch.save, node_info via pickle)."""
    import torch

    d.mkdir(parents=True, exist_ok=True)
    torch.save(torch.from_numpy(np.stack([src, dst])), d / "edge_index.pt")
    torch.save(torch.from_numpy(rel), d / "edge_types.pt")
    torch.save(torch.from_numpy(node_types.astype(np.int64)), d / "node_types.pt")
    type_names = [NODE_TYPES[t] for t in node_types.tolist()]
    node_info = {i: {"type": t, "name": name, "text": text}
                 for i, (t, name, text) in enumerate(zip(type_names, names, texts))}
    with open(d / "node_info.pkl", "wb") as f:
        pickle.dump(node_info, f, protocol=pickle.HIGHEST_PROTOCOL)
    del node_info, type_names
    for name, value in (("node_type_dict", dict(enumerate(NODE_TYPES))),
                        ("edge_type_dict", {i: r[0] for i, r in enumerate(RELATIONS)})):
        with open(d / f"{name}.pkl", "wb") as f:
            pickle.dump(value, f)


# --------------------------------------------------------------------------- child phases

def phase_load_stark(d: Path) -> dict:
    import torch

    t0 = time.perf_counter()
    data = {f: torch.load(d / f"{f}.pt") for f in ("edge_index", "edge_types", "node_types")}
    for f in ("node_info", "node_type_dict", "edge_type_dict"):
        with open(d / f"{f}.pkl", "rb") as fh:
            data[f] = pickle.load(fh)
    load_s = time.perf_counter() - t0
    return {"load_s": load_s, "peak_rss_gib": peak_rss_gib(), "num_edges": int(data["edge_types"].numel())}


def _percentiles(samples_s: list[float]) -> dict:
    a = np.asarray(samples_s) * 1e3
    return {"n": len(a), "p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)),
            "max_ms": float(a.max())}


def phase_load_cache(d: Path, queries: int, hubs: int, seed: int) -> dict:
    from ark.data.graph import KnowledgeGraph

    rss_before = peak_rss_gib()
    t0 = time.perf_counter()
    g = KnowledgeGraph.load(d, mmap=True)
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    first_text = g.node_text(g.num_nodes // 2)
    first_neighbors = len(g.neighbors(g.num_nodes // 2))
    first_touch_s = time.perf_counter() - t1

    rng = np.random.default_rng(seed + 1)
    degree = np.diff(np.asarray(g._indptr))  # noqa: SLF001 - benchmark reads the CSR offsets directly
    hub_ids = np.flatnonzero(degree >= HUB_DEGREE)
    hub_sample = hub_ids if len(hub_ids) <= hubs else rng.choice(hub_ids, hubs, replace=False)
    random_ids = rng.integers(0, g.num_nodes, size=queries)
    rel_of_type = {t: [r for r, s, o, _ in RELATIONS if t in (s, o)] for t in NODE_TYPES}

    def timed(ids) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """Per node and filter: the first call (cold: page faults on the memory-mapped CSR) and the
        median of `REPEATS` further calls (warm; robust to preemption on a busy machine)."""
        cold = {"none": [], "type": [], "type+relation": []}
        warm = {"none": [], "type": [], "type+relation": []}
        for v in ids.tolist():
            own = g.node_type_name(v)
            rels = rel_of_type[own]
            r = rels[rng.integers(len(rels))]
            other = next(o if s == own else s for name, s, o, _ in RELATIONS if name == r)
            for key, kwargs in (("none", {}), ("type", {"node_types": [other]}),
                                ("type+relation", {"node_types": [other], "relations": [r]})):
                times = []
                for _ in range(1 + REPEATS):
                    t = time.perf_counter()
                    g.neighbors(v, **kwargs)
                    times.append(time.perf_counter() - t)
                cold[key].append(times[0])
                warm[key].append(float(np.median(times[1:])))
        return cold, warm

    timed(random_ids[:50])  # warm-up: imports, first calls
    rand_cold, rand = timed(random_ids)
    hub_cold, hub = timed(hub_sample)
    return {
        "load_s": load_s, "first_touch_s": first_touch_s, "peak_rss_gib": peak_rss_gib(),
        "rss_at_start_gib": rss_before, "num_nodes": g.num_nodes, "num_edges": g.num_edges,
        "hubs_total": int(len(hub_ids)), "max_degree": int(degree.max()),
        "median_degree": float(np.median(degree)), "text_chars": len(first_text),
        "first_neighbors": first_neighbors,
        "random": {k: _percentiles(v) for k, v in rand.items()},
        "hubs": {k: _percentiles(v) for k, v in hub.items()} if len(hub_sample) else {},
        "random_cold": {k: _percentiles(v) for k, v in rand_cold.items()},
        "hubs_cold": {k: _percentiles(v) for k, v in hub_cold.items()} if len(hub_sample) else {},
    }


def _child(phase: str, args) -> dict:
    cmd = [sys.executable, __file__, "--phase", phase, "--dir", str(args.dir), "--queries", str(args.queries),
           "--hubs", str(args.hubs), "--seed", str(args.seed)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"phase {phase} failed:\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- driver

def run(args) -> dict:
    out: dict = {"scale": args.scale}
    if args.reuse and (args.dir / "cache" / "meta.json").exists() and (args.dir / "stark" / "edge_type_dict.pkl").exists():
        print(f"reusing the files under {args.dir} (no build)", flush=True)
        meta = json.loads((args.dir / "cache" / "meta.json").read_text())
        out.update(nodes=meta["num_nodes"], edges=meta["num_edges"], from_edges_s=float("nan"),
                   save_s=float("nan"), build_peak_rss_gib=float("nan"))
    else:
        build(args, out)
    out["size_stark_gib"] = sum(p.stat().st_size for p in (args.dir / "stark").iterdir()) / 2**30
    out["size_cache_gib"] = sum(p.stat().st_size for p in (args.dir / "cache").iterdir()) / 2**30
    out["stark_load"] = _child("load-stark", args)
    out["cache"] = _child("load-cache", args)
    out["speedup"] = out["stark_load"]["load_s"] / max(out["cache"]["load_s"], 1e-9)
    return out


def build(args, out: dict) -> None:
    """Synthesize the graph, write it in stark-qa's layout, build and save the `KnowledgeGraph` cache."""
    from ark.data.graph import KnowledgeGraph

    t = time.perf_counter()
    node_types, names, texts, src, dst, rel = synthesize(args.scale, args.seed)
    out["synthesize_s"] = time.perf_counter() - t
    out["nodes"], out["edges"] = len(node_types), len(src)
    print(f"synthesized {len(node_types):,} nodes, {len(src):,} stored edges in {out['synthesize_s']:.1f} s "
          f"(peak RSS {peak_rss_gib():.2f} GiB)", flush=True)

    t = time.perf_counter()
    write_stark_files(args.dir / "stark", node_types, names, texts, src, dst, rel)
    out["write_stark_s"] = time.perf_counter() - t
    print(f"wrote stark-qa style files in {out['write_stark_s']:.1f} s (peak RSS {peak_rss_gib():.2f} GiB)", flush=True)

    t = time.perf_counter()
    g = KnowledgeGraph.from_edges("bench", list(NODE_TYPES), node_types, names, texts,
                                  [r[0] for r in RELATIONS], src, dst, rel,
                                  candidate_ids=np.flatnonzero(node_types == 0))
    out["from_edges_s"] = time.perf_counter() - t
    del names, texts, src, dst, rel
    print(f"KnowledgeGraph.from_edges: {out['from_edges_s']:.1f} s (peak RSS {peak_rss_gib():.2f} GiB)", flush=True)
    t = time.perf_counter()
    g.save(args.dir / "cache")
    out["save_s"] = time.perf_counter() - t
    del g
    out["build_peak_rss_gib"] = peak_rss_gib()
    print(f"KnowledgeGraph.save: {out['save_s']:.1f} s (peak RSS {peak_rss_gib():.2f} GiB)", flush=True)


def report(r: dict) -> None:
    c, s = r["cache"], r["stark_load"]
    print()
    print(f"== bench_graph: scale {r['scale']}: {r['nodes']:,} nodes, {r['edges']:,} stored edges, "
          f"4 node types, 4 relations; max degree {c['max_degree']:,}, median {c['median_degree']:.0f}, "
          f"{c['hubs_total']} nodes of degree >= {HUB_DEGREE:,}")
    print(f"build   from_edges {r['from_edges_s']:.1f} s, save {r['save_s']:.1f} s, "
          f"peak RSS {r['build_peak_rss_gib']:.2f} GiB (incl. synthesis and stark-style files)")
    print(f"size    cache {r['size_cache_gib']:.2f} GiB, stark-style files {r['size_stark_gib']:.2f} GiB")
    print(f"load    KnowledgeGraph.load (mmap) {c['load_s'] * 1e3:.1f} ms (peak RSS {c['peak_rss_gib']:.2f} GiB); "
          f"stark-qa style torch.load + pickle {s['load_s']:.2f} s (peak RSS {s['peak_rss_gib']:.2f} GiB); "
          f"speedup {r['speedup']:.0f}x (target >= 10x: {'PASS' if r['speedup'] >= 10 else 'FAIL'})")
    print(f"        first text + neighbor access after load: {c['first_touch_s'] * 1e3:.2f} ms")
    print(f"neighbors: per node, warm = median of {REPEATS} calls after the first; cold = the first call")
    for label, block, cold in (("random nodes", c["random"], c["random_cold"]),
                               (f"degree >= {HUB_DEGREE:,}", c["hubs"], c["hubs_cold"])):
        for key, p in block.items():
            print(f"neighbors [{label:>16}] filter={key:<14} n={p['n']:<5} warm p50 {p['p50_ms']:.3f} ms  "
                  f"p99 {p['p99_ms']:.3f} ms  max {p['max_ms']:.3f} ms | cold p50 {cold[key]['p50_ms']:.3f} ms  "
                  f"p99 {cold[key]['p99_ms']:.3f} ms")
    worst = max(p["p99_ms"] for block in (c["random"], c["hubs"]) for k, p in block.items() if k != "none")
    print(f"filtered-neighbor warm p99 (worst of both sets) {worst:.3f} ms "
          f"(target < 1 ms: {'PASS' if worst < 1 else 'FAIL'})")


def main(argv: list[str] | None = None) -> None:
    from ark.home import ark_home

    p = argparse.ArgumentParser(description="Benchmark KnowledgeGraph at MAG scale")
    p.add_argument("--scale", type=float, default=1.0, help="fraction of MAG's size (1.0: 1.9M nodes, 40M edges)")
    p.add_argument("--dir", type=Path, default=ark_home() / "bench_graph", help="where the files go (default: <ARK_HOME>/bench_graph)")
    p.add_argument("--queries", type=int, default=2000, help="random nodes to time neighbors on")
    p.add_argument("--hubs", type=int, default=300, help="at most this many nodes of degree >= 10k")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="keep the generated files")
    p.add_argument("--reuse", action="store_true", help="measure files kept by an earlier --keep run (no build)")
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    p.add_argument("--phase", choices=("all", "load-stark", "load-cache"), default="all", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.phase == "load-stark":
        print(json.dumps(phase_load_stark(args.dir / "stark")))
        return
    if args.phase == "load-cache":
        print(json.dumps(phase_load_cache(args.dir / "cache", args.queries, args.hubs, args.seed)))
        return
    if not 0 < args.scale <= 2:
        raise SystemExit(f"--scale must be in (0, 2], got {args.scale}")
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        r = run(args)
        report(r)
        if args.json:
            args.json.write_text(json.dumps(r, indent=1))
    finally:
        if not (args.keep or args.reuse):
            for sub in ("stark", "cache"):
                shutil.rmtree(args.dir / sub, ignore_errors=True)


if __name__ == "__main__":
    main()
