"""Dense and hybrid search through the run (ark.config.evaluation; experiments/run.py): whole runs on the hand-made tables graph with
OpenAI-style embeddings from the scripted server (the OpenAI route, its key from the environment),
the run identity that keeps dense and lexical runs apart, and the up-front errors for bad settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.scripted_server import ScriptedServer
from tests.helpers.policies import search_select_finish

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"
DIM = 64  # the scripted server's hashed embeddings


def overrides(tmp_path: Path, server: ScriptedServer, *extra: str) -> list[str]:
    return ["graph=tables", f"graph.path={KG}", "graph.name=tables_kg", "backbone=scripted",
            f"backbone.base_url={server.base_url}", "budget=t5_n1", f"paths.data={tmp_path}/data",
            f"paths.runs={tmp_path}/runs", f"paths.llm_cache={tmp_path}/llm.sqlite", "progress=false",
            "n_boot=50", "encoder=openai-3-small", f"+encoder.encoder.base_url={server.base_url}",
            f"+encoder.encoder.dimensions={DIM}", "+encoder.encoder.max_retries=0", *extra]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dense-runs-secret")
    with ScriptedServer(responder=search_select_finish) as s:
        yield s


def test_dense_and_hybrid_baselines_run_and_are_scored_like_bm25(tmp_path, server):
    from ark.config.compose import compose
    from ark.config.evaluation import run

    summaries = {}
    for retriever in ("bm25", "dense", "hybrid"):
        cfg = compose(overrides(tmp_path, server, f"retriever={retriever}"))
        summaries[retriever] = run(cfg)
        out = Path(cfg.out_dir)
        info = json.loads((out / "run.json").read_text())
        assert info["retriever"] == retriever
        assert info["encoder"] == (None if retriever == "bm25" else "openai-3-small")
        assert "sk-test-dense-runs-secret" not in (out / "config.yaml").read_text() + json.dumps(info)
    for retriever, s in summaries.items():
        assert s["complete"] and s["n_ok"] == 5, retriever
        assert set(s["metrics"]) == set(summaries["bm25"]["metrics"]), retriever
    assert server.calls == 0                                   # no chat call: the baselines use no LLM
    texts = [t for r in server.embedding_requests for t in r["input"]]
    assert len(set(texts)) == len(texts)                       # every node text and query embedded once
    assert all(r["dimensions"] == DIM and r["encoding_format"] == "base64" for r in server.embedding_requests)
    # the hybrid baseline is told apart from the dense one by its own directory and identity
    cfg = compose(overrides(tmp_path, server, "retriever=hybrid"))
    assert Path(cfg.out_dir).name == "hybrid-openai-3-small-none-none_test"
    # a rerun resumes: nothing recomputed, no node re-encoded (the cache's manifest matches)
    before = len(server.embedding_requests)
    assert run(cfg)["this_run"]["computed"] == 0 and len(server.embedding_requests) == before


def test_hybrid_search_run_has_its_own_directory_identity_and_tool_text(tmp_path, server):
    from ark.config.compose import compose
    from ark.config.identity import run_identity
    from ark.config.evaluation import run

    lexical = compose(overrides(tmp_path, server))
    hybrid = compose(overrides(tmp_path, server, "search=hybrid"))
    assert Path(hybrid.out_dir).name == "ark-scripted-t5_n1-full-hybrid-openai-3-small_test"
    lex_id, hyb_id = run_identity(lexical), run_identity(hybrid)
    # the paper's lexical search adds nothing to the identity: runs made before dense search still resume
    assert not any(k.startswith(("search.", "encoder.")) for k in lex_id)
    assert hyb_id["search.setup.config.mode"] == "hybrid" and hyb_id["search.setup.config.rrf_k"] == 60
    assert hyb_id["encoder.name"] == "openai-3-small" and hyb_id["encoder.encoder.dimensions"] == DIM
    assert not any(k.startswith(("encoder.encoder.cache", "search.setup.encoder")) for k in hyb_id)

    summary = run(hybrid)
    assert summary["complete"] and summary["n_ok"] == 5
    out = Path(hybrid.out_dir)
    traj = json.loads((out / "trajectories" / "q1.json").read_text())
    observation = json.dumps(traj)
    assert "mode=hybrid" in observation and "candidate nodes (keyword or meaning)" in observation
    info = json.loads((out / "run.json").read_text())
    assert info["search"] == "hybrid" and info["encoder"] == "openai-3-small"

    # a dense command pointed at the lexical run's directory is refused, naming the differing settings
    run(lexical)
    dense_there = compose(overrides(tmp_path, server, "search=dense", f"out_dir={lexical.out_dir}"))
    files = {p: p.stat().st_mtime_ns for p in Path(lexical.out_dir).rglob("*")}
    with pytest.raises(SystemExit, match=r"holds a run made with other settings: encoder\.encoder\.") as refused:
        run(dense_there)
    assert "_target_" not in str(refused.value)          # class import paths are not settings
    assert {p: p.stat().st_mtime_ns for p in Path(lexical.out_dir).rglob("*")} == files
    # so is BM25 neighbor ranking switched to dense under the lexical search's name and directory
    neighbors_dense = compose(overrides(tmp_path, server, "search.setup.config.neighbor_rank=dense"))
    assert neighbors_dense.out_dir == lexical.out_dir
    with pytest.raises(SystemExit, match=r"holds a run made with other settings"):
        run(neighbors_dense)


def _entry(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, str(REPO / "experiments" / "run.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


BAD = [  # (overrides, the first line of the error)
    (["search.setup.config.mode=semantic"],
     "bad setting in search.setup.config: unknown search mode 'semantic'; valid: lexical, dense, hybrid"),
    (["search=hybrid", "search.setup.config.fusion=max"],
     "bad setting in search.setup.config: unknown search fusion 'max'; valid: rrf, weighted"),
    (["search=dense", "search.setup.config.neighbor_rank=cosine"],
     "bad setting in search.setup.config: unknown search neighbor_rank 'cosine'; valid: bm25, dense, hybrid"),
    (["search=dense", "encoder.encoder.model=e5-large"],
     "bad setting in encoder.encoder: unknown local encoder model 'e5-large'; valid: all-MiniLM-L6-v2"),
    (["retriever=dense", "encoder=openai-3-small", "encoder.encoder.model=text-embedding-4"],
     "bad setting in encoder.encoder: unknown OpenAI embedding model 'text-embedding-4'; valid: "
     "text-embedding-3-small"),
    (["search=dense", "search.setup.index_kind=ivfpq"],
     "bad setting search.setup.index_kind='ivfpq': choose one of flat, hnsw, ivf"),
    (["retriever=hybrid", "retriever.build.index_kind=annoy"],
     "bad setting retriever.build.index_kind='annoy': choose one of flat, hnsw, ivf"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
@pytest.mark.commands
def test_bad_search_and_encoder_settings_stop_with_one_line_and_leave_nothing(tmp_path, args, message):
    proc = _entry(["graph=tables", f"graph.path={KG}", "backbone=scripted", f"paths.data={tmp_path}/data", *args],
                  tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.strip().startswith(message), proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_unknown_search_or_encoder_option_lists_the_choices(tmp_path):
    for group, bad, choices in (("search", "semantic", ("dense", "hybrid", "lexical")),
                                ("encoder", "e5", ("ada-002", "minilm", "openai-3-small"))):
        proc = _entry([f"{group}={bad}"], tmp_path)
        assert proc.returncode == 1 and f"Could not find '{group}/{bad}'" in proc.stderr
        assert all(f"\t{c}\n" in proc.stderr for c in choices), proc.stderr
        assert list(tmp_path.iterdir()) == []


def test_a_missing_or_mismatched_embedding_cache_is_named_with_the_command_that_builds_it(tmp_path, server):
    from ark.search.embeddings import OpenAIEncoder, cache_path
    from ark.config.compose import compose
    from ark.config.evaluation import run

    cfg = compose(overrides(tmp_path, server, "search=dense", "search.setup.build_embeddings=false"))
    with pytest.raises(SystemExit) as e:
        run(cfg)
    msg = str(e.value)
    assert "embedding cache" in msg and "is missing" in msg
    assert "build it with: python -m experiments.embed graph=tables encoder=openai-3-small" in msg
    assert not Path(cfg.out_dir).exists() and server.embedding_requests == []
    # a cache made with other vectors: the dimension is named
    enc = OpenAIEncoder("text-embedding-3-small", dimensions=DIM)
    from hydra.utils import instantiate

    d = cache_path(instantiate(cfg.graph).cache_dir, enc)          # inside the graph's own cache folder
    d.mkdir(parents=True)
    (d / "vectors.npy").write_bytes(b"")
    (d / "manifest.json").write_text(json.dumps({"encoder": enc.name, "dim": 384, "graph": "tables_kg"}))
    with pytest.raises(SystemExit, match=r"holds 384-dimensional vectors but encoder text-embedding-3-small-d64 "
                                         r"makes 64-dimensional ones; build it with: python -m experiments.embed"):
        run(cfg)
    assert not Path(cfg.out_dir).exists()
    # building it (the search's default) makes the run go
    summary = run(compose(overrides(tmp_path, server, "search=dense")))
    assert summary["complete"]
