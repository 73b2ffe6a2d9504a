"""Graph sources: name checks, cache reuse, stale and corrupted caches rebuilt, queries."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from ark.data import sources, stark
from ark.data.sources import StarkSource
from ark.data.graph import KnowledgeGraph
from tests.helpers.stark_fixtures import build


@pytest.fixture()
def root(tmp_path):
    build(tmp_path / "stark")
    return tmp_path


def _count_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    real = stark.read_graph

    def counting(name, raw, **kw):
        reads.append(name)
        return real(name, raw, **kw)

    monkeypatch.setattr(stark, "read_graph", counting)
    return reads


def test_unknown_graph_lists_valid_ones(root):
    with pytest.raises(ValueError, match=r"unknown STaRK graph 'primekg'.*amazon, mag, prime"):
        StarkSource("primekg", root)


@pytest.mark.parametrize("name", ["prime", "mag", "amazon"])
def test_cache_is_built_once_then_reused(root, monkeypatch, name):
    reads = _count_reads(monkeypatch)
    first = StarkSource(name, root).graph()
    second = StarkSource(name, root).graph()
    assert reads == [name]
    assert (root / "cache" / name / "meta.json").exists()
    assert second.fingerprint == first.fingerprint and second.num_nodes == first.num_nodes
    assert [second.node_text(i) for i in range(second.num_nodes)] == [first.node_text(i) for i in range(first.num_nodes)]


def test_corrupted_cache_is_rebuilt(root, monkeypatch):
    reads = _count_reads(monkeypatch)
    g = StarkSource("prime", root).graph()
    texts = [g.node_text(i) for i in range(g.num_nodes)]  # before the corruption reaches g's memory map
    path = root / "cache" / "prime" / "texts.arrow"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    h = StarkSource("prime", root).graph()
    assert reads == ["prime", "prime"]
    assert [h.node_text(i) for i in range(h.num_nodes)] == texts
    KnowledgeGraph.load(root / "cache" / "prime")  # valid again


def _count_hashes(monkeypatch) -> list[str]:
    """The files whose content is hashed (`ark.data.sources.file_digest` reading them)."""
    hashed: list[str] = []
    real = hashlib.file_digest

    def counting(f, digest):
        hashed.append(Path(f.name).name)
        return real(f, digest)

    monkeypatch.setattr(hashlib, "file_digest", counting)
    monkeypatch.setattr(sources, "RACY_S", -1.0)        # files written a moment ago count as settled
    return hashed


def test_changed_raw_files_make_the_cache_stale(root, monkeypatch):
    reads = _count_reads(monkeypatch)
    StarkSource("mag", root).graph()
    raw = next((root / "stark" / "skb" / "mag" / "processed").glob("*.pt"))
    data = bytearray(raw.read_bytes())
    data[-2] ^= 1                                       # one byte: the same size
    st = raw.stat()
    raw.write_bytes(bytes(data))
    os.utime(raw, ns=(st.st_atime_ns, st.st_mtime_ns))   # and the old time back (cp -p, rsync -t, touch -r)
    assert (raw.stat().st_size, raw.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    StarkSource("mag", root).graph()
    assert reads == ["mag", "mag"]


def test_a_copy_of_the_same_bytes_is_hashed_again_not_rebuilt(root, monkeypatch):
    reads, hashed = _count_reads(monkeypatch), _count_hashes(monkeypatch)
    StarkSource("mag", root).graph()
    assert hashed and (root / "cache" / sources.HASHES_FILE).exists()
    hashed.clear()
    sources._memo.clear()                               # a new process (a sweep job's cold start)
    StarkSource("mag", root).graph()
    assert reads == ["mag"] and hashed == []            # nothing changed: no file read, no rebuild
    raw = next((root / "stark" / "skb" / "mag" / "processed").glob("*.pt"))
    copy = raw.with_suffix(".copy")
    shutil.copy2(raw, copy)
    os.replace(copy, raw)                               # the same bytes, a new inode (rsync's way)
    StarkSource("mag", root).graph()
    assert reads == ["mag"] and hashed == [raw.name]    # hashed again, same content: the cache stands


def test_missing_raw_files_name_the_fetch_command(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"ark download prime --root {tmp_path}"):   # the data root
        StarkSource("prime", tmp_path).graph()


def test_queries_and_splits(root):
    queries = StarkSource("prime", root).queries()
    assert "test" in queries.split_names()
    for split in ("train", "val", "test"):  # human_generated_eval has an id space of its own
        assert queries.split(split)
        for q in queries.split(split):
            assert queries[q.id] == q
    with pytest.raises(ValueError, match="valid"):
        queries.split("dev")


def test_edges_option_reaches_the_graph_from_hydra_and_has_its_own_cache(root, monkeypatch):
    """graph.edges=stark on the command line: the source loads stark-qa's merged edges, cached apart
    from the stored ones, and the run's identity says which."""
    from hydra.utils import instantiate

    from ark.config.compose import compose
    from ark.config.identity import run_info

    reads = _count_reads(monkeypatch)
    cfg = compose(["graph=amazon", "graph.edges=stark", f"paths.data={root}"])
    assert run_info(cfg)["edges"] == "stark" and run_info(compose(["graph=amazon"]))["edges"] == "stored"
    merged = instantiate(cfg.graph).graph()
    stored = instantiate(compose(["graph=amazon", f"paths.data={root}"]).graph).graph()
    assert merged.meta["edges"] == "stark" and stored.meta["edges"] == "stored"
    assert (root / "cache" / "amazon-edges-stark" / "meta.json").exists()
    assert (root / "cache" / "amazon" / "meta.json").exists()
    also_view = merged.relation_id("also_view")
    assert also_view not in merged.neighbors(0).relations[merged.neighbors(0).nodes == 1]
    assert also_view in stored.neighbors(0).relations[stored.neighbors(0).nodes == 1]
    assert reads == ["amazon", "amazon"]
    assert StarkSource("amazon", root, edges="stark").graph().both_ways_relations == merged.relation_names
    assert reads == ["amazon", "amazon"]                                   # the stark cache is reused
    with pytest.raises(Exception, match="valid: stored, stark"):
        instantiate(compose(["graph=amazon", "graph.edges=both"]).graph)


def test_a_new_stark_edges_rule_rebuilds_only_the_stark_cache(root, monkeypatch):
    """A graph merged by an older `stark_undirected` (a revision before STARK_EDGES_REVISION) is not
    reused: the edges="stark" cache key carries the revision; the stored graph's key does not."""
    from ark.data import stark

    reads = _count_reads(monkeypatch)
    StarkSource("amazon", root, edges="stark").graph()
    StarkSource("amazon", root).graph()
    before = reads[:]
    stored_key = StarkSource("amazon", root).input_fingerprint()
    monkeypatch.setattr(stark, "STARK_EDGES_REVISION", stark.STARK_EDGES_REVISION + 1)
    assert StarkSource("amazon", root).input_fingerprint() == stored_key
    StarkSource("amazon", root, edges="stark").graph()
    StarkSource("amazon", root).graph()
    assert reads == before + ["amazon"]                    # the stark graph read again, the stored one not
