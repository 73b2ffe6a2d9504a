"""ark.data.stark against stark-qa 1.1.0 itself: node documents, neighbor sets, candidates (comparison tier).

Run: bash tests/comparison/make_env.sh && .venv-compare/bin/pytest -m comparison tests/comparison

For every node of the fixture graphs in all three processed layouts (tests/helpers/stark_fixtures.py), and
of the demo graph when ark.data.demo can build it: our ``node_text(i)`` must equal
``SKB.get_doc_info(i, add_rel=False, compact=False)`` and our neighbor set (both directions) must equal
``SKB.get_neighbor_nodes(i)`` (stark-qa makes the graph undirected). With ``edges="stark"`` the
per-relation neighbor sets and the edge list itself must equal stark-qa's, AMAZON's merged pairs included,
and so must every node's per-relation neighbors on 400 random graphs, half of them storing each pair with
a relation drawn per direction (stark-qa reads a node's own row of the adjacency).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from ark.data import stark

pytestmark = pytest.mark.comparison

GRAPHS = ("prime", "mag", "amazon")


@pytest.fixture(scope="module")
def pairs(fixture_root, stark_skb):
    return {name: (stark.read_graph(name, fixture_root), stark_skb(name, fixture_root)) for name in GRAPHS}


@pytest.fixture(scope="module")
def stark_edge_graphs(fixture_root):
    return {name: stark.read_graph(name, fixture_root, edges="stark") for name in GRAPHS}


def _assert_same_documents(graph, skb):
    assert graph.num_nodes == len(skb.node_info)
    diffs = [i for i in range(graph.num_nodes)
             if graph.node_text(i) != skb.get_doc_info(i, add_rel=False, compact=False)]
    if diffs:
        i = diffs[0]
        pytest.fail(f"{len(diffs)} documents differ, first node {i}:\nours:  {graph.node_text(i)!r}\n"
                    f"stark: {skb.get_doc_info(i, add_rel=False, compact=False)!r}")


def _assert_same_neighbors(graph, skb, nodes, relations=None):
    for i in nodes:
        ours = set(graph.neighbors(int(i)).nodes.tolist())
        assert ours == set(skb.get_neighbor_nodes(int(i))), f"node {i}"
        for r in relations or []:
            ours_r = set(graph.neighbors(int(i), relations=[r]).nodes.tolist())
            assert ours_r == set(skb.get_neighbor_nodes(int(i), r)), f"node {i}, relation {r}"


@pytest.mark.parametrize("name", GRAPHS)
def test_documents_equal_get_doc_info(pairs, name):
    graph, skb = pairs[name]
    _assert_same_documents(graph, skb)


@pytest.mark.parametrize("name", GRAPHS)
def test_candidates_and_vocabularies_equal(pairs, name):
    graph, skb = pairs[name]
    assert graph.candidate_ids.tolist() == list(skb.candidate_ids)
    assert graph.node_type_names == skb.node_type_lst()
    assert graph.relation_names == skb.rel_type_lst()
    assert np.array_equal(np.asarray(graph.node_types), skb.node_types.numpy())


@pytest.mark.parametrize("name", GRAPHS)
def test_neighbor_sets_equal_get_neighbor_nodes(pairs, name):
    graph, skb = pairs[name]
    # per relation too, except AMAZON, whose fixture has a pair linked by two types (see below)
    relations = None if name == "amazon" else graph.relation_names
    _assert_same_neighbors(graph, skb, range(graph.num_nodes), relations)


def test_amazon_mixed_pair_is_merged_by_stark_and_kept_by_us(pairs, stark_edge_graphs):
    """Product 0 -also_buy-> 1 and 1 -also_view-> 0: stark-qa's to_undirected(reduce='mean') averages the
    type ids (0 and 1 -> 0), so the pair is also_buy only, both ways; edges="stored" keeps both stored
    edges, edges="stark" merges them as stark-qa does."""
    graph, skb = pairs["amazon"]
    assert 1 in skb.get_neighbor_nodes(0, "also_buy") and 1 not in skb.get_neighbor_nodes(0, "also_view")
    e = graph.neighbors(0)
    rows = {(int(n), graph.relation_names[r], bool(o)) for n, r, o in zip(e.nodes, e.relations, e.outgoing)}
    assert {(1, "also_buy", True), (1, "also_view", False)} <= rows
    merged = stark_edge_graphs["amazon"]
    assert 1 in merged.neighbors(0, relations=["also_buy"]).nodes and 1 not in merged.neighbors(0, relations=["also_view"]).nodes


@pytest.mark.parametrize("name", GRAPHS)
def test_stark_edges_equal_skb_per_relation_and_edge_list(pairs, stark_edge_graphs, name):
    """edges="stark": per-relation neighbor sets equal SKB.get_neighbor_nodes(i, r) for every node and
    relation (AMAZON included), and the edge list equals stark-qa's edge_index/edge_types as a multiset."""
    _, skb = pairs[name]
    graph = stark_edge_graphs[name]
    _assert_same_neighbors(graph, skb, range(graph.num_nodes), graph.relation_names)
    ei, et = skb.edge_index.numpy(), skb.edge_types.numpy()
    theirs = sorted(zip(ei[0].tolist(), ei[1].tolist(), et.tolist()))
    ours = []
    for v in range(graph.num_nodes):
        e = graph.neighbors(v)
        ours += [(v, int(u), int(r)) for u, r, o in zip(e.nodes, e.relations, e.outgoing) if o]
    assert sorted(ours) == theirs


def _skb_edges(src, dst, rel, num_nodes: int, num_relations: int):
    """stark-qa's SKB built on a bare graph: its edge list after SKB.__init__'s undirected step."""
    import torch
    from stark_qa.skb.knowledge_base import SKB

    skb = SKB({i: {} for i in range(num_nodes)}, torch.tensor(np.stack([src, dst]), dtype=torch.long),
              node_type_dict={0: "node"}, edge_type_dict={r: f"r{r}" for r in range(num_relations)},
              node_types=torch.zeros(num_nodes, dtype=torch.long), edge_types=torch.tensor(rel, dtype=torch.long))
    ei, et = skb.edge_index.numpy(), skb.edge_types.numpy()
    return sorted(zip(ei[0].tolist(), ei[1].tolist(), et.tolist()))


def test_stark_undirected_equals_skb_on_pairs_stored_both_ways_with_unbalanced_duplicates():
    """Random graphs whose every pair is stored in both directions, some rows duplicated in one
    direction only: stark-qa's is_undirected compares multisets and merges them; so must we."""
    rng = np.random.default_rng(0)
    n_merged = n_kept = 0
    for case in range(3000):
        num_nodes, num_relations = int(rng.integers(2, 12)), int(rng.integers(1, 5))
        m = int(rng.integers(1, 15))
        a, b = rng.integers(0, num_nodes, m), rng.integers(0, num_nodes, m)
        src, dst = np.r_[a, b], np.r_[b, a]                         # every pair both ways
        rel = rng.integers(0, num_relations, 2 * m)
        if case % 3:                                               # duplicate some rows one way only
            extra = rng.choice(2 * m, size=int(rng.integers(1, 2 * m + 1)))
            src, dst, rel = np.r_[src, src[extra]], np.r_[dst, dst[extra]], np.r_[rel, rng.integers(0, num_relations, extra.size)]
        order = rng.permutation(src.size)
        src, dst, rel = src[order], dst[order], rel[order]
        ours = stark.stark_undirected(src, dst, rel, num_nodes)
        assert sorted(zip(*(x.tolist() for x in ours))) == _skb_edges(src, dst, rel, num_nodes, num_relations), case
        merged = ours[0].size != src.size or not np.array_equal(ours[0], src)
        n_merged += merged
        n_kept += not merged
    assert n_merged > 1000 and n_kept > 500   # both branches reached


def test_query_splits_equal_stark_positions(fixture_root, monkeypatch):
    """Our split positions equal STaRKDataset.get_idx_split() (its _download is the only network step)."""
    from stark_qa.retrieval import STaRKDataset

    monkeypatch.setattr(STaRKDataset, "_download", lambda self: None)
    for name in GRAPHS:
        ours = stark.read_queries(name, fixture_root)
        theirs = STaRKDataset(name, str(fixture_root / "qa"))
        split = theirs.get_idx_split()
        for s in stark.SPLITS:
            assert ours.positions(s).tolist() == split[s].tolist()
        for pos in range(len(theirs)):
            query, qid, answers, _ = theirs[pos]
            assert (ours[qid].text, list(ours[qid].answer_ids)) == (query, answers)


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory):
    """The demo graph built by the real builder; a builder that fails fails this tier."""
    from ark.data import demo

    root = tmp_path_factory.mktemp("demo") / "stark"
    demo.build_demo(root)
    return root


def test_demo_graph_equals_prime_skb(demo_root, stark_skb):
    t0 = time.perf_counter()
    graph = stark.read_graph("demo", demo_root)
    skb = stark_skb("demo", demo_root)
    _assert_same_documents(graph, skb)
    assert graph.candidate_ids.tolist() == list(skb.candidate_ids)
    assert stark.read_graph("demo", demo_root, edges="stark").fingerprint == graph.fingerprint  # stored both ways
    # neighbor sets: every node from stark-qa's undirected edge_index, a sample through get_neighbor_nodes
    ei = skb.edge_index.numpy()
    theirs = [set() for _ in range(graph.num_nodes)]
    for a, b in zip(ei[0].tolist(), ei[1].tolist()):
        theirs[a].add(b)
    for i in range(graph.num_nodes):
        assert set(graph.neighbors(i).nodes.tolist()) == theirs[i], f"node {i}"
    rng = np.random.default_rng(0)
    degrees = np.array([graph.degree(i) for i in range(graph.num_nodes)])
    sample = np.concatenate([rng.choice(graph.num_nodes, 200, replace=False), np.argsort(-degrees)[:20]])
    _assert_same_neighbors(graph, skb, sample, graph.relation_names)
    print(f"demo comparison on {graph.num_nodes} nodes took {time.perf_counter() - t0:.1f}s")


def _random_graph(rng, case: int):
    """A random stored edge list: every other graph stores each pair both ways with a relation drawn
    for each direction (``a -r1-> b`` and ``b -r0-> a``: symmetric, so stark-qa keeps it as stored),
    the rest are directed at random or symmetric with a few extra rows one way (stark-qa merges them)."""
    num_nodes, num_relations = int(rng.integers(2, 16)), int(rng.integers(2, 5))
    m = int(rng.integers(1, 3 * num_nodes))
    a, b = rng.integers(0, num_nodes, m), rng.integers(0, num_nodes, m)
    if case % 4 == 3:                                      # directed at random
        src, dst, rel = a, b, rng.integers(0, num_relations, m)
    else:                                                  # every pair both ways, a relation per direction
        src, dst, rel = np.r_[a, b], np.r_[b, a], rng.integers(0, num_relations, 2 * m)
        if case % 4 == 1:                                  # a few rows more one way
            extra = rng.choice(src.size, size=int(rng.integers(1, 4)))
            src, dst, rel = np.r_[src, src[extra]], np.r_[dst, dst[extra]], np.r_[rel, rng.integers(0, num_relations, extra.size)]
    order = rng.permutation(src.size)
    return num_nodes, num_relations, src[order], dst[order], rel[order]


def _skb(src, dst, rel, num_nodes: int, num_relations: int):
    import torch
    from stark_qa.skb.knowledge_base import SKB

    return SKB({i: {} for i in range(num_nodes)}, torch.tensor(np.stack([src, dst]), dtype=torch.long),
               node_type_dict={0: "node"}, edge_type_dict={r: f"r{r}" for r in range(num_relations)},
               node_types=torch.zeros(num_nodes, dtype=torch.long), edge_types=torch.tensor(rel, dtype=torch.long))


def _graph(src, dst, rel, num_nodes: int, num_relations: int, edges: str):
    return stark.graph_with_edges("random", ["node"], np.zeros(num_nodes, dtype=np.int32),
                                  [str(i) for i in range(num_nodes)], [""] * num_nodes,
                                  [f"r{r}" for r in range(num_relations)], src, dst, rel, edges=edges)


def test_stark_edges_per_relation_neighbors_equal_skb_where_a_pair_has_a_relation_each_way():
    """edges="stark" on 400 random graphs, half of them symmetric with a relation drawn per direction:
    every node's neighbor list, per relation and over all relations, equals stark-qa's
    ``get_neighbor_nodes(i, r)``, which reads node i's row of the per-relation adjacency (the stored
    edges *from* i): for ``0 -r1-> 7`` and ``7 -r0-> 0``, 7 is an r1 neighbor of 0 and not an r0 one.
    Reading both directions of the merged edges (what edges="stark" did before) gets many lists wrong."""
    rng = np.random.default_rng(38)
    lists = differ = differ_both_directions = kept_mixed = 0
    for case in range(400):
        num_nodes, num_relations, src, dst, rel = _random_graph(rng, case)
        skb = _skb(src, dst, rel, num_nodes, num_relations)
        graph = _graph(src, dst, rel, num_nodes, num_relations, "stark")
        # the merged edges read in both directions: the rule before edges="stark" read a node's own row
        both_directions = _graph(*stark.stark_undirected(src, dst, rel, num_nodes), num_nodes, num_relations, "stored")
        kept = len(skb.edge_index[0]) == src.size and np.array_equal(skb.edge_index[0].numpy(), src)
        pairs = {(s, d): r for s, d, r in zip(src.tolist(), dst.tolist(), rel.tolist())}
        kept_mixed += kept and any(pairs.get((d, s), r) != r for (s, d), r in pairs.items())
        for i in range(num_nodes):
            assert set(graph.neighbors(i).nodes.tolist()) == set(skb.get_neighbor_nodes(i)), (case, i)
            for r in graph.relation_names:
                theirs = set(skb.get_neighbor_nodes(i, r))
                lists += 1
                differ += set(graph.neighbors(i, relations=[r]).nodes.tolist()) != theirs
                differ_both_directions += set(both_directions.neighbors(i, relations=[r]).nodes.tolist()) != theirs
    assert differ == 0, f"{differ} of {lists} per-relation neighbor lists differ from stark-qa's"
    assert kept_mixed >= 150 and differ_both_directions > 100   # the case is reached, and it matters
