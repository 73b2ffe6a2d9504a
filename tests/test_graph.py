"""The KnowledgeGraph store on the toy graph: neighbors (both directions, filters), cache round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ark.data.graph import CacheError, KnowledgeGraph, group_neighbors
from tests.helpers.toy_graph import toy_graph

# Hand-computed from tests/toy_graph.EDGES: node -> {neighbor: {(relation, outgoing)}}
EXPECTED = {
    0: {3: {("associated with", True), ("associated with", False)}, 6: {("indication", False)},
        7: {("indication", False)}, 8: {("phenotype present", True)}, 9: {("phenotype present", True)}},
    7: {2: {("indication", True)}, 0: {("indication", True)}, 5: {("target", True)}},
    8: {3: {("associated with", False)}, 0: {("phenotype present", False)}, 11: {("parent-child", False)}},
    11: {8: {("parent-child", True)}, 10: {("parent-child", True)}},
}


def as_sets(g: KnowledgeGraph, edges) -> dict:
    nodes, links = group_neighbors(edges)
    return {int(n): {(g.relation_names[r], o) for r, o in l} for n, l in zip(nodes, links)}


@pytest.fixture(scope="module")
def g():
    return toy_graph()


@pytest.mark.parametrize("v", sorted(EXPECTED))
def test_neighbors_both_directions(g, v):
    assert as_sets(g, g.neighbors(v)) == EXPECTED[v]
    assert g.degree(v) == sum(len(s) for s in EXPECTED[v].values())


@pytest.mark.parametrize("v", sorted(EXPECTED))
@pytest.mark.parametrize("types", [None, ["drug"], ["effect/phenotype", "gene/protein"]])
@pytest.mark.parametrize("rels", [None, ["indication"], ["associated with", "phenotype present"]])
def test_neighbor_filters(g, v, types, rels):
    want = {}
    for n, links in EXPECTED[v].items():
        if types is not None and g.node_type_name(n) not in types:
            continue
        kept = {(r, o) for r, o in links if rels is None or r in rels}
        if kept:
            want[n] = kept
    assert as_sets(g, g.neighbors(v, node_types=types, relations=rels)) == want


def test_neighbor_order_is_by_id_then_direction(g):
    e = g.neighbors(0)
    assert e.nodes.tolist() == [3, 3, 6, 7, 8, 9]
    assert e.outgoing.tolist() == [True, False, False, False, True, True]


def test_unknown_filter_names_list_valid_choices(g):
    with pytest.raises(ValueError, match=r"unknown node type 'protein'.*'gene/protein'"):
        g.neighbors(0, node_types=["protein"])
    with pytest.raises(ValueError, match=r"unknown relation 'treats'.*'indication'"):
        g.neighbors(0, relations=["treats"])


def test_bad_node_ids(g):
    with pytest.raises(IndexError, match="outside 0..11"):
        g.neighbors(12)
    with pytest.raises(TypeError):
        g.node_text("3")


def test_node_attributes(g):
    assert g.node_name(3) == "FBN1"
    assert g.node_type_name(6) == "drug"
    assert "Fibrillin 1" in g.node_text(3)
    assert list(g.texts())[11].startswith("- name: Abnormality of the cardiovascular system")
    assert g.num_nodes == 12 and g.num_edges == 15
    assert g.stats()["edges_per_relation"]["indication"] == 3


def test_cache_round_trip_is_memory_mapped(g, tmp_path):
    g.save(tmp_path)
    h = KnowledgeGraph.load(tmp_path)
    assert isinstance(h._nbr, np.memmap) and isinstance(h.node_types, np.memmap)
    assert h.fingerprint == g.fingerprint
    assert [h.node_text(i) for i in range(12)] == [g.node_text(i) for i in range(12)]
    for v in range(12):
        assert as_sets(h, h.neighbors(v)) == as_sets(g, g.neighbors(v))
    assert h.candidate_ids.tolist() == list(range(12))


def test_truncated_cache_is_detected(g, tmp_path):
    g.save(tmp_path)
    path = tmp_path / "nbr.npy"
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(CacheError, match="nbr.npy"):
        KnowledgeGraph.load(tmp_path)


def test_corrupted_cache_is_detected(g, tmp_path):
    g.save(tmp_path)
    path = tmp_path / "texts.arrow"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError, match="texts.arrow"):
        KnowledgeGraph.load(tmp_path)


def test_half_written_cache_is_not_valid(g, tmp_path):
    g.save(tmp_path)
    (tmp_path / "meta.json").unlink()
    with pytest.raises(CacheError, match="meta.json"):
        KnowledgeGraph.load(tmp_path)
    g.save(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert set(meta["files"]) == {"indptr.npy", "nbr.npy", "rel.npy", "out.npy", "nbr_type.npy",
                                  "node_types.npy", "candidate_ids.npy", "texts.arrow"}


def test_old_cache_version_is_rejected(g, tmp_path):
    g.save(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    meta["cache_version"] -= 1
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CacheError, match="version"):
        KnowledgeGraph.load(tmp_path)


def test_filters_on_a_random_graph_equal_a_row_mask(tmp_path):
    """The one-pass filter over the stored per-row neighbor types equals masking the rows by
    ``node_types[nbr]`` and relation, before and after a cache round trip."""
    rng = np.random.default_rng(3)
    n, e, types, rels = 300, 4000, ["a", "b", "c", "d", "e"], ["r0", "r1", "r2"]
    node_types = rng.integers(0, len(types), n)
    src, dst = rng.integers(0, 30, e), rng.integers(0, n, e)  # low ids are hubs
    rel = rng.integers(0, len(rels), e)
    g = KnowledgeGraph.from_edges("rand", types, node_types, [str(i) for i in range(n)], ["t"] * n, rels,
                                  src, dst, rel)
    g.save(tmp_path)
    h = KnowledgeGraph.load(tmp_path)
    assert np.array_equal(np.asarray(h._nbr_type), node_types[np.asarray(h._nbr)])
    for v in range(0, n, 7):
        full = g.neighbors(v)
        for tf in (None, [], ["a"], ["b", "e"], types):
            for rf in (None, [], ["r1"], ["r0", "r2"]):
                keep = np.ones(len(full), bool)
                if tf is not None:
                    keep &= np.isin(node_types[full.nodes], [types.index(t) for t in tf])
                if rf is not None:
                    keep &= np.isin(full.relations, [rels.index(r) for r in rf])
                for graph in (g, h):
                    got = graph.neighbors(v, node_types=tf, relations=rf)
                    assert got.nodes.dtype == np.int64 and got.relations.dtype == np.int32
                    assert got.outgoing.dtype == bool
                    assert got.nodes.tolist() == full.nodes[keep].tolist()
                    assert got.relations.tolist() == full.relations[keep].tolist()
                    assert got.outgoing.tolist() == full.outgoing[keep].tolist()


def test_from_edges_validates(g):
    with pytest.raises(ValueError, match="outside"):
        KnowledgeGraph.from_edges("x", ["a"], [0], ["n"], ["t"], ["r"], [0], [1], [0])
