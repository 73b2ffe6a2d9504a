"""What stark-qa itself asks the hub for, and its own BM25 baseline, next to ark (comparison tier).

Run: bash tests/comparison/make_env.sh && .venv-compare/bin/pytest -m comparison tests/comparison

* Download: a local stand-in for the hub (tests/helpers/hub_server.py, reached through ``HF_ENDPOINT``) serves a
  small dataset repo in STaRK's layout. stark-qa's own loaders (``load_skb(..., download_processed=True)``
  and ``STaRKDataset``) run in a subprocess with ``huggingface_hub``'s download functions wrapped so
  every file they ask for is recorded; ``ark download`` (`ark.data.stark.download`) runs against the same server.
  Both must ask for the same files (and ``ark.data.stark.hub_files`` must name them), and the processed
  files both end up with must be the same bytes.
* BM25: ``stark_qa.models.BM25`` over stark-qa's SKB against ``ark.baselines.BM25Retriever`` over our
  graph, on every fixture graph: the same candidates with a positive score, the same scores. (stark-qa
  1.1.0's ``BM25.forward`` fails as shipped with bm25s 0.3.16; see the test for the one attribute set.)
  The ``stark_qa`` ranking (`BM25Retriever.stark_qa_forward`) must return exactly ``BM25.forward``'s
  dict and, scored with its own scores, exactly the Evaluator's numbers, on graphs full of tied and
  zero scores.
"""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ark.data import stark
from tests.helpers import stark_fixtures as fx
from tests.helpers.hub_server import HubServer

pytestmark = pytest.mark.comparison
REPO = Path(__file__).resolve().parents[2]
GRAPHS = ("prime", "mag", "amazon")

# Runs stark-qa's own loaders with huggingface_hub's download functions wrapped (recording what is asked).
STARK_DRIVER = r"""
import json, sys, types
tdc = types.ModuleType("tdc"); res = types.ModuleType("tdc.resource"); res.PrimeKG = object
tdc.resource = res; sys.modules["tdc"] = tdc; sys.modules["tdc.resource"] = res   # PyTDC stand-in (conftest.py)
import huggingface_hub
asked = []
def wrap(module, attr):
    real = getattr(module, attr)
    def recorded(*args, **kwargs):
        asked.append({"function": attr, "args": [a for a in args if isinstance(a, str)],
                      "filename": kwargs.get("filename", args[1] if len(args) > 1 else None),
                      "allow_patterns": kwargs.get("allow_patterns")})
        return real(*args, **kwargs)
    setattr(module, attr, recorded)
import stark_qa.tools.download_hf as dl, stark_qa.skb.prime as prime, stark_qa.skb.mag as mag, stark_qa.skb.amazon as amazon
for module in (dl, prime, mag, amazon):
    for attr in ("hf_hub_download", "snapshot_download", "list_repo_files"):
        if hasattr(module, attr):
            wrap(module, attr)
from stark_qa import load_skb
from stark_qa.retrieval import STaRKDataset
name, root = sys.argv[1], sys.argv[2]
skb = load_skb(name, root=root + "/skb", download_processed=True)
qa = STaRKDataset(name, root + "/qa")
json.dump({"asked": asked, "num_nodes": skb.num_nodes(), "num_queries": len(qa)}, open(sys.argv[3], "w"))
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory, fixture_root):
    repo = fx.build_hub_repo(tmp_path_factory.mktemp("hub-repo"), processed=fixture_root)
    with HubServer(repo) as server:
        yield server


def _env(home: Path, endpoint: str) -> dict:
    """Environment of a subprocess talking to the hub at ``endpoint``, with its own (empty) hub cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_OFFLINE="0", HF_HOME=str(home),
               HF_HUB_DISABLE_TELEMETRY="1", PYTHONPATH=str(REPO), NO_PROXY="127.0.0.1,localhost")
    return env


def _entries(files: list[str], name: str) -> list[str]:
    """Files asked for, folded into `ark.data.stark.hub_files` entries (a folder stands for its files)."""
    out: list[str] = []
    for f in files:
        entry = next((h for h in stark.hub_files(name) if h.endswith("/") and f.startswith(h)), f)
        if entry not in out:
            out.append(entry)
    return out


@pytest.mark.parametrize("name", GRAPHS)
def test_ark_asks_the_hub_for_what_stark_qa_asks_for(hub, tmp_path, name):
    # stark-qa's own loaders
    hub.requests.clear()
    theirs_root = tmp_path / "stark-qa"
    subprocess.run([sys.executable, "-c", STARK_DRIVER, name, str(theirs_root), str(tmp_path / "asked.json")],
                   cwd=tmp_path, env=_env(tmp_path / "hf-stark-qa", hub.url), check=True, timeout=600,
                   stdout=subprocess.DEVNULL)
    record = json.loads((tmp_path / "asked.json").read_text())
    theirs_files = [a["filename"] for a in record["asked"] if a["function"] == "hf_hub_download"]
    theirs_sent = hub.downloaded()
    assert sorted(theirs_sent) == sorted(set(theirs_files))       # the wrappers saw every file sent

    # ark.data.stark, through huggingface_hub, against the same hub (--root is the data root: <root>/stark)
    hub.requests.clear()
    ours_root = tmp_path / "ark" / "stark"
    r = subprocess.run([sys.executable, "-m", "ark", "download", name, "--root", str(ours_root.parent), "--no-progress"],
                       cwd=tmp_path, env=_env(tmp_path / "hf-ark", hub.url), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    ours_sent = hub.downloaded()

    assert sorted(ours_sent) == sorted(set(theirs_files))
    assert _entries(theirs_files, name) == stark.hub_files(name)
    # and both end up with the same processed files
    theirs_processed = theirs_root / "skb" / name / "processed"
    ours_processed = stark.graph_dir(name, ours_root)
    rel = ours_processed.relative_to(ours_root / "skb" / name / "processed")
    for f in stark.graph_files(name, ours_root):
        assert filecmp.cmp(f, theirs_processed / rel / f.name, shallow=False), f.name
    assert stark.read_graph(name, ours_root).num_nodes == record["num_nodes"]
    assert len(stark.read_queries(name, ours_root)) == record["num_queries"]


def test_bm25_baseline_equals_stark_qa_bm25(pairs_for_bm25):
    from stark_qa.models import BM25

    from ark.baselines import BM25Retriever

    n_compared = 0
    for name, (graph, skb, queries) in pairs_for_bm25.items():
        theirs_model = BM25(skb)
        # stark-qa 1.1.0 builds bm25s.BM25(corpus=documents), and with bm25s 0.3.16 retrieve() then returns
        # the documents instead of their positions, which forward() looks up as positions (KeyError).
        # Without the stored corpus retrieve() returns positions; everything else is stark-qa's own code.
        theirs_model.retriever.corpus = None
        ours = BM25Retriever(graph, top=len(skb.candidate_ids))
        for query in queries:
            theirs = theirs_model.forward(query, k=len(skb.candidate_ids))
            positive = {int(i): float(s) for i, s in theirs.items() if s > 0}
            got = ours.retrieve(query)
            _, got_scores = ours.index.search(query, len(skb.candidate_ids))
            assert sorted(got) == sorted(positive), (name, query)
            np.testing.assert_allclose(got_scores, [positive[i] for i in got], rtol=1e-6, atol=1e-6)
            # the same order up to ties: our list's scores are stark-qa's, sorted descending
            np.testing.assert_allclose([positive[i] for i in got], sorted(positive.values(), reverse=True), atol=1e-6)
            n_compared += bool(got)
    assert n_compared > 20


@pytest.fixture(scope="module")
def pairs_for_bm25(fixture_root, stark_skb):
    out = {}
    for name in GRAPHS:
        graph = stark.read_graph(name, fixture_root)
        queries = [q.text for q in stark.read_queries(name, fixture_root)][:10]
        # words taken from the documents themselves, so that most queries match something
        words = " ".join(graph.node_text(int(i)) for i in graph.candidate_ids[:8]).split()
        rng = np.random.default_rng(0)
        queries += [" ".join(rng.choice(words, size=int(rng.integers(1, 6)))) for _ in range(15)]
        out[name] = (graph, stark_skb(name, fixture_root), queries)
    return out


class _DocumentsSKB:
    """All stark_qa.models.BM25 reads of an SKB: the candidate ids and their documents."""

    def __init__(self, graph):
        self.graph = graph
        self.candidate_ids = graph.candidate_ids.tolist()
        self.num_candidates = len(self.candidate_ids)

    def get_doc_info(self, idx, add_rel=False, compact=False):
        return self.graph.node_text(int(idx))


def _tied_graph(rng, case: int):
    """Documents of a few words from a ten-word vocabulary, a third of them copies of others: many exact
    score ties, and most candidates score 0 for any one query."""
    from ark.data.graph import KnowledgeGraph

    vocab = ["aorta", "valve", "collagen", "joint", "gene", "kinase", "fever", "rash", "lung", "renal"]
    n = int(rng.integers(20, 160))
    texts = [" ".join(rng.choice(vocab, size=int(rng.integers(1, 5)))) for _ in range(n)]
    for i in rng.choice(n, size=n // 3, replace=False):
        texts[int(i)] = texts[int(rng.integers(0, n))]
    cands = np.sort(rng.choice(n, size=int(rng.integers(8, n + 1)), replace=False))
    graph = KnowledgeGraph.from_edges(f"ties-{case}", ["node"], np.zeros(n, dtype=np.int64), [f"n{i}" for i in range(n)],
                                      texts, ["r"], [0], [1], [0], candidate_ids=cands)
    queries = [" ".join(rng.choice(vocab + ["unseen"], size=int(rng.integers(1, 4)))) for _ in range(4)]
    return graph, queries


def test_stark_qa_ranking_equals_stark_qa_bm25_forward_and_its_numbers():
    """Many lists with ties and zero scores: BM25Retriever's stark_qa ranking is BM25.forward's dict, id
    for id and score for score (float32 bits), for k from 1 to all candidates, and stark_qa-mode metrics
    with those scores are the Evaluator's. The paper ranking (positive scores, ties by id) is not."""
    import torchmetrics
    from stark_qa.evaluator import Evaluator
    from stark_qa.models import BM25

    from ark.baselines import BM25Retriever
    from ark.analysis.metrics import evaluate, torchmetrics_semantics

    metrics = ["hit@1", "hit@3", "hit@5", "hit@10", "recall@5", "recall@20", "mrr"]
    here = torchmetrics_semantics(torchmetrics.__version__)
    rng = np.random.default_rng(7)
    seen = {"lists": 0, "zeros_kept": 0, "tie_at_the_cut": 0, "paper_list_differs": 0}
    for case in range(150):
        graph, queries = _tied_graph(rng, case)
        model = BM25(_DocumentsSKB(graph))
        model.retriever.corpus = None   # stark-qa 1.1.0 + bm25s 0.3.16 (see the test above)
        ours = BM25Retriever(graph, top=100)
        n = len(graph.candidate_ids)
        for query in queries:
            full = ours.index.dense_scores(query)
            for k in sorted({1, 3, max(1, n // 2), min(100, n), n}):
                theirs = model.forward(query, k=k)
                ids, scores = ours.stark_qa_forward(query, k)
                assert dict(zip(ids, scores)) == theirs, (case, query, k)
                gold = rng.choice(graph.candidate_ids, size=int(rng.integers(1, 4)), replace=False).tolist()
                expected = Evaluator(graph.candidate_ids.tolist())(theirs, torch_long(gold), metrics=metrics)
                got = evaluate(ids, gold, graph.candidate_ids, metrics, mode="stark_qa", scores=scores, torchmetrics=here)
                assert got == expected, (case, query, k, gold)
                paper_ids, paper_scores = BM25Retriever(graph, top=k).retrieve_scored(query)
                if paper_ids:
                    paper = evaluate(paper_ids, gold, graph.candidate_ids, metrics, mode="stark_qa",
                                     scores=paper_scores, torchmetrics=here)
                    seen["paper_list_differs"] += paper != expected
                kth = np.sort(full)[::-1]
                seen["lists"] += 1
                seen["zeros_kept"] += 0.0 in scores
                seen["tie_at_the_cut"] += bool(k < n and kth[k - 1] == kth[k])
    assert seen["zeros_kept"] > 1000 and seen["tie_at_the_cut"] > 1000 and seen["paper_list_differs"] > 200, seen



def test_a_bm25_run_in_stark_qa_mode_equals_stark_qa_under_both_torchmetrics(tmp_path):
    """A BM25 baseline run through the runner (`ark.run.runner`) in stark_qa mode with stark-qa's own list:
    each record holds BM25.forward's dict (ids and scores), and its numbers are stark-qa's Evaluator on that
    dict under the installed torchmetrics and, in a subprocess, under the other release; on lists full of
    zero scores the two behaviours give the run different numbers."""
    import torch
    import torchmetrics
    from stark_qa.evaluator import Evaluator
    from stark_qa.models import BM25

    from ark.baselines import BM25Retriever
    from ark.analysis.metrics import torchmetrics_semantics
    from ark.run.records import load_predictions
    from ark.run.runner import RunSettings, run_queries
    from tests.helpers.stark_releases import other_torchmetrics, stark_under_other_release
    from tests.helpers.tiny_retriever import Q

    metrics = ["hit@1", "hit@5", "recall@20", "mrr"]
    here = torchmetrics_semantics(torchmetrics.__version__)
    other = torchmetrics_semantics(other_torchmetrics()[0])
    rng = np.random.default_rng(11)
    cases, ours_other, differ = [], [], 0
    for case in range(40):
        graph, texts = _tied_graph(rng, case)
        model = BM25(_DocumentsSKB(graph))
        model.retriever.corpus = None   # stark-qa 1.1.0 + bm25s 0.3.16 (see the first BM25 test)
        queries = [Q(i, t, tuple(rng.choice(graph.candidate_ids, size=int(rng.integers(1, 4)), replace=False).tolist()))
                   for i, t in enumerate(texts)]
        k = min(100, int(rng.integers(1, len(graph.candidate_ids) + 1)))   # a bottom tie below k < all
        recs = {}
        for tm in (here, other):
            s = RunSettings(out_dir=tmp_path / f"{case}-{tm}", progress=False, n_boot=10, top=k, metrics=metrics,
                            metrics_mode="stark_qa", torchmetrics=tm)
            run_queries(BM25Retriever(graph, top=k, ranking="stark_qa"), queries, s, graph.candidate_ids)
            recs[tm] = load_predictions(s.out_dir)
        for q in queries:
            theirs = model.forward(q.text, k=k)
            mine, theirs_other = recs[here][str(q.id)], recs[other][str(q.id)]
            assert dict(zip(mine["ranking"], mine["scores"])) == theirs, (case, q.text)
            assert mine["metrics"] == Evaluator(graph.candidate_ids.tolist())(
                theirs, torch.LongTensor(list(q.answer_ids)), metrics=metrics), (case, q.text)
            cases.append({"cand": graph.candidate_ids.tolist(), "scores": [[k, v] for k, v in theirs.items()],
                          "gold": list(q.answer_ids)})
            ours_other.append(theirs_other["metrics"])
            differ += mine["metrics"] != theirs_other["metrics"]
    _, expected = stark_under_other_release(tmp_path, cases, metrics)
    assert ours_other == expected
    assert differ > 20, differ


def torch_long(ids):
    import torch

    return torch.LongTensor(ids)
