"""Golden runs: a fixed set of evaluation runs whose files must not change under a refactoring.

The set covers each kind of run the runner makes: the BM25 baseline and ARK (2 agents, fused) on the
demo graph, ARK under a toolset ablation, and dense retrieval (the dense baseline and ARK with hybrid
search, OpenAI-style embeddings) on the hand-made tables graph. ARK talks to the scripted
OpenAI-compatible server with a fixed policy (search the question, explore the first hit's
neighbors, select what was shown, finish), so every byte of a run follows from the code.

`normalized(run_dir)` reads a run directory's files with what legitimately differs between two
executions taken out: wall-clock times and latencies; the temporary folder, the checkout and the data
root the runs were made under; the scripted server's address and the tool-call ids it numbers in
arrival order; the import paths of configured classes (``_target_``), which say where a class
lives, not how a run behaves; and the input files' times in run.json (``data_files`` keeps each file's
size, ``data.graph``/``data.queries`` are hashes of names, sizes and times). `tests/test_golden_runs.py` compares a fresh set against `tests/golden/runs/`.

    python -m tests.helpers.golden_runs --update     # rewrite tests/golden/runs/ (only for an intended change)
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "runs"
KG = REPO / "tests" / "data" / "tables_kg"
from tests.helpers.paths import DEMO_ROOT  # noqa: E402
DIM = 64  # the scripted server's hashed embeddings
# keys and columns whose values are measured times, not results
TIMED = re.compile(r"(^|_)(latency|wall|overhead|time|timestamp|started|finished|elapsed|duration)(_s|_ms)?$"
                   r"|_s$|_s_per_|^t$")
FILES = ("predictions.jsonl", "metrics.json", "per_query.csv", "trajectory_stats.csv", "attribution.csv",
         "run.json", "config.yaml")


def policy(request: dict):
    """Search the question, explore the first hit's neighbors with the question's first word, select
    every id shown, finish."""
    from tests.helpers.scripted_server import first_user_message, shown_ids, tool_reply

    msgs = request["messages"]
    step = sum(m["role"] == "assistant" for m in msgs)
    question = first_user_message(request)
    shown = [x for m in msgs if m["role"] == "tool" for x in shown_ids(m["content"])]
    if step == 0:
        return tool_reply(("search_graph", {"query": question, "k": 5}))
    if step == 1 and shown:
        return tool_reply(("explore_neighbors", {"node_id": shown[0], "query": question.split()[0], "k": 5}))
    if step <= 2:
        return tool_reply(("select", {"node_ids": list(dict.fromkeys(shown))[:12]}), ("finish", {}))
    return tool_reply(("finish", {}))


def _common(tmp: Path, base_url: str) -> list[str]:
    return [f"backbone.base_url={base_url}", f"paths.runs={tmp}/runs", f"paths.llm_cache={tmp}/llm.sqlite",
            "progress=false", "n_boot=50", "backbone=scripted"]


def run_set(tmp: Path, base_url: str) -> dict[str, Path]:
    """Make every golden run under ``tmp``; returns {name: run directory}."""
    from ark.config.compose import compose
    from ark.config.evaluation import run

    demo = [f"paths.data={DEMO_ROOT}", "graph=demo", "limit=6"]
    tables = ["graph=tables", f"graph.path={KG}", "graph.name=tables_kg", f"paths.data={tmp}/data",
              "encoder=openai-3-small", f"+encoder.encoder.base_url={base_url}",
              f"+encoder.encoder.dimensions={DIM}", "+encoder.encoder.max_retries=0"]
    runs = {
        "bm25_demo": [*demo, "retriever=bm25"],
        "ark_demo": [*demo, "budget=t5_n1", "budget.agent.n_agents=2"],
        "ark_demo_no_neighbors": [*demo, "budget=t5_n1", "ablation=no_neighbors"],
        "dense_tables": [*tables, "retriever=dense"],
        "ark_hybrid_tables": [*tables, "budget=t5_n1", "search=hybrid"],
    }
    out = {}
    for name, overrides in runs.items():
        cfg = compose([*_common(tmp, base_url), *overrides])
        run(cfg)
        out[name] = Path(cfg.out_dir)
    return out


def _dropped(key: str) -> bool:
    """Measured times; the import paths of configured classes (``_target_``: where a class lives is
    not a setting) and the fingerprint of an identity that held them."""
    return bool(TIMED.search(key)) or key.endswith("_target_") or key == "fingerprint"


DATA_FINGERPRINTS = ("data.graph", "data.queries")   # hashes of the input files' names, sizes and times


def _clean(obj, subs: dict[str, str]):
    if isinstance(obj, dict):
        if "data_files" in obj:   # run.json: each input file's "size:mtime_ns"; the times are the checkout's
            obj = {**obj, "data_files": {_sub(f, subs): sig.split(":")[0] + ":<TIME>"
                                         for f, sig in obj["data_files"].items()}}
        return {k: "<FINGERPRINT>" if k in DATA_FINGERPRINTS else _clean(v, subs)
                for k, v in obj.items() if not _dropped(str(k))}
    if isinstance(obj, list):
        return [_clean(v, subs) for v in obj]
    if isinstance(obj, str):
        return _sub(obj, subs)
    return obj


def _sub(text: str, subs: dict[str, str]) -> str:
    for old, new in subs.items():
        text = text.replace(old, new)
    return text


def _csv(text: str, subs: dict[str, str]) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return ""
    keep = [i for i, c in enumerate(rows[0]) if not TIMED.search(c)]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in rows:
        w.writerow([_sub(r[i], subs) for i in keep if i < len(r)])
    return buf.getvalue()


def _renumber_calls(text: str) -> str:
    """Tool-call ids in order of first appearance: the scripted server numbers its replies in arrival
    order, which depends on how concurrent agents interleave."""
    ids: dict[str, str] = {}
    return re.sub(r'"call_\d+"', lambda m: ids.setdefault(m.group(0), f'"call_{len(ids)}"'), text)


def normalized(run_dir: Path, tmp: Path | str, base_url: str) -> dict[str, str]:
    """{relative path: normalized text} of a run directory's result files and trajectories (``tmp``,
    the scripted server's ``base_url``, the demo's data root and the checkout replaced by placeholders)."""
    subs = {base_url: "<SERVER>", str(tmp): "<TMP>", str(DEMO_ROOT): "<DATA>", str(REPO): "<REPO>"}
    out = {}
    paths = [run_dir / f for f in FILES if (run_dir / f).exists()]
    paths += sorted((run_dir / "trajectories").glob("*.json")) if (run_dir / "trajectories").is_dir() else []
    for p in paths:
        rel = p.relative_to(run_dir).as_posix()
        text = p.read_text()
        if p.suffix == ".json":
            text = _renumber_calls(json.dumps(_clean(json.loads(text), subs), indent=1, sort_keys=True) + "\n")
        elif p.suffix == ".jsonl":
            recs = sorted((_clean(json.loads(line), subs) for line in text.splitlines() if line.strip()),
                          key=lambda r: str(r.get("query_id")))
            text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in recs)
        elif p.suffix == ".csv":
            text = _csv(text, subs)
        else:   # config.yaml
            text = "".join(line for line in _sub(text, subs).splitlines(keepends=True)
                           if not line.lstrip().startswith("_target_:"))
        out[rel] = text
    return out


def make(tmp: Path) -> dict[str, dict[str, str]]:
    """Every golden run made under ``tmp`` against a scripted server, normalized."""
    from tests.helpers.scripted_server import ScriptedServer

    os.environ.setdefault("OPENAI_API_KEY", "sk-golden-runs-not-a-key")
    with ScriptedServer(responder=policy) as server:
        dirs = run_set(tmp, server.base_url)
        return {name: normalized(d, tmp, server.base_url) for name, d in dirs.items()}


def write(golden: dict[str, dict[str, str]], root: Path = GOLDEN) -> None:
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    for name, files in golden.items():
        for rel, text in files.items():
            p = root / name / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)


def read(root: Path = GOLDEN) -> dict[str, dict[str, str]]:
    return {d.name: {p.relative_to(d).as_posix(): p.read_text() for p in sorted(d.rglob("*")) if p.is_file()}
            for d in sorted(root.iterdir()) if d.is_dir()}


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--update"]:
        raise SystemExit("usage: python -m tests.helpers.golden_runs --update")
    with tempfile.TemporaryDirectory() as d:
        write(make(Path(d)))
    print(f"wrote {GOLDEN}")
