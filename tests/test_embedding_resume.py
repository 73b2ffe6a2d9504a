"""A node-embedding build that is killed resumes from the rows it had written, in whichever process runs
next, and what dead builds left beside the cache is removed (a live builder's folder is left alone).
OpenAI-style embeddings from the scripted server stand in for the paid API; the build is the real one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ark import atomic
from ark.search.embeddings import OpenAIEncoder, cache_path, node_embeddings
from tests.helpers.scripted_server import ScriptedServer
from tests.helpers.toy_graph import toy_graph

REPO = Path(__file__).resolve().parents[1]
BATCH = 2   # nodes per step of the build (the toy graph has 12)


def encoder(url: str) -> OpenAIEncoder:
    return OpenAIEncoder("text-embedding-3-small", provider="vllm", base_url=url, dimensions=8, batch_size=2,
                         max_retries=0)


def encoded_texts(server) -> int:
    return sum(len(r["input"]) for r in server.embedding_requests)


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def named_for(d: Path, pid: int, kind: str = "tmp") -> Path:
    """The temporary (or moved-aside) name process ``pid`` would give ``d``: this process's name with
    the pid swapped (`ark.atomic.temp_path`)."""
    mine = atomic.temp_path(d).name[len(d.name) + len(".tmp-"):]
    rest = mine.split("-", 1)[1:]
    return d.with_name(f"{d.name}.{kind}-{pid}" + "".join("-" + r for r in rest))


@pytest.fixture()
def server():
    with ScriptedServer(latency_s=0.4) as s:
        yield s


@pytest.mark.commands
def test_a_build_killed_with_minus_9_resumes_where_it_stopped(tmp_path, server):
    graph = toy_graph()
    whole = node_embeddings(graph, encoder(server.base_url), None, batch=BATCH).vectors   # encoded in memory
    first = encoded_texts(server)
    d = cache_path(tmp_path, encoder(server.base_url))
    code = ("from ark.search.embeddings import OpenAIEncoder, node_embeddings\n"
            "from tests.helpers.toy_graph import toy_graph\n"
            f"enc = OpenAIEncoder('text-embedding-3-small', provider='vllm', base_url={server.base_url!r}, "
            "dimensions=8, batch_size=2, max_retries=0)\n"
            f"node_embeddings(toy_graph(), enc, {str(tmp_path)!r}, batch={BATCH}, progress=False)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 120

    def rows_written() -> int:
        for progress in d.parent.glob(f"{d.name}.tmp-{proc.pid}-*/progress.json"):   # the killed build's folder
            try:
                return json.loads(progress.read_text())["done"]
            except (OSError, ValueError):
                pass
        return 0

    while time.monotonic() < deadline and rows_written() < 2 * BATCH:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = rows_written()
    assert 2 * BATCH <= done < graph.num_nodes and not d.exists()
    before = encoded_texts(server)
    emb = node_embeddings(graph, encoder(server.base_url), tmp_path, batch=BATCH, progress=False)
    assert encoded_texts(server) - before == graph.num_nodes - done        # only the rows it had not written
    assert np.allclose(emb.vectors, whole, atol=1e-6) and emb.vectors.shape == (graph.num_nodes, 8)
    assert sorted(p.name for p in d.parent.iterdir()) == [d.name]           # nothing left beside the cache
    assert json.loads((d / "timing.json").read_text())["resumed_at"] == done
    assert first == graph.num_nodes


class Failing(OpenAIEncoder):
    """The real encoder, which fails on the n-th batch of the build (a dropped network, a Ctrl-C)."""

    def __init__(self, url: str, fail_at: int):
        super().__init__("text-embedding-3-small", provider="vllm", base_url=url, dimensions=8, batch_size=2,
                         max_retries=0)
        self.calls, self.fail_at = 0, fail_at

    def encode(self, texts, show_progress=False):
        self.calls += 1
        if self.calls == self.fail_at:
            raise KeyboardInterrupt
        return super().encode(texts, show_progress)


def test_a_failed_build_resumes_in_the_same_process_and_dead_leftovers_go(tmp_path, server):
    graph = toy_graph()
    d = cache_path(tmp_path, encoder(server.base_url))
    d.parent.mkdir(parents=True)
    junk = named_for(d, dead_pid())                                         # a dead build of another kind
    junk.mkdir()
    (junk / "vectors.npy").write_bytes(b"half a header")
    aside = named_for(d, dead_pid(), "old")
    aside.mkdir()
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        busy = named_for(d, live.pid)                                       # a concurrent builder's work
        busy.mkdir()
        with pytest.raises(KeyboardInterrupt):
            node_embeddings(graph, Failing(server.base_url, fail_at=4), tmp_path, batch=BATCH, progress=False)
        mine = atomic.temp_path(d)
        assert json.loads((mine / "progress.json").read_text())["done"] == 3 * BATCH   # kept, not removed
        before = encoded_texts(server)
        emb = node_embeddings(graph, encoder(server.base_url), tmp_path, batch=BATCH, progress=False)
        assert encoded_texts(server) - before == graph.num_nodes - 3 * BATCH
        assert np.allclose(emb.vectors, node_embeddings(graph, encoder(server.base_url), None).vectors, atol=1e-6)
        assert sorted(p.name for p in d.parent.iterdir()) == sorted([d.name, busy.name])   # the live one stays
    finally:
        live.communicate(b"")


def test_a_leftover_of_another_manifest_is_not_resumed(tmp_path, server):
    """A killed build of the graph before it changed holds rows of other texts: the build starts over."""
    graph = toy_graph()
    with pytest.raises(KeyboardInterrupt):
        node_embeddings(toy_graph("other"), Failing(server.base_url, fail_at=3), tmp_path, batch=BATCH,
                        progress=False)
    d = cache_path(tmp_path, encoder(server.base_url))
    os.replace(atomic.temp_path(d), named_for(d, dead_pid()))
    before = encoded_texts(server)
    node_embeddings(graph, encoder(server.base_url), tmp_path, batch=BATCH, progress=False)
    assert encoded_texts(server) - before == graph.num_nodes
    assert sorted(p.name for p in d.parent.iterdir()) == [d.name]


def test_leftovers_are_the_dead_processes_of_this_host(tmp_path):
    """What `ark.atomic.leftovers` may remove: a dead process's temporary or moved-aside name on this host;
    never this process's own, a running process's, another target's, or a name another host made."""
    d = tmp_path / "cache"
    dead, other = named_for(d, dead_pid()), named_for(d, dead_pid(), "old")
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        kept = [atomic.temp_path(d), named_for(d, live.pid), named_for(tmp_path / "cachex", dead_pid()),
                d.with_name(f"{d.name}.tmp-{dead_pid()}-1-another.host")]
        for p in [dead, other, *kept]:
            p.mkdir()
        assert atomic.leftovers(d) == sorted([dead, other])
    finally:
        live.communicate(b"")
