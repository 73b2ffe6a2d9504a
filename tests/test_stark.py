"""ark.data.stark on small fixtures in the three STaRK processed layouts, offline.

Expected documents here are worked out by hand from stark-qa 1.1.0's get_doc_info rules; the
comparison tier (tests/comparison/test_stark_graph.py) checks every node against stark-qa itself.
"""

from __future__ import annotations

import json
import shutil
import socket
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ark.data import stark
from tests.helpers import stark_fixtures as fx


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""
    def refuse(self, address, *args, **kwargs):
        raise AssertionError(f"network access attempted: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: refuse(None, a))


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return fx.build(tmp_path_factory.mktemp("stark"))


@pytest.fixture(scope="module")
def graphs(root):
    return {name: stark.read_graph(name, root) for name in stark.STARK_GRAPHS}


def _copy(root: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "stark"
    shutil.copytree(root, dst)
    return dst


# ---------------------------------------------------------------------- graphs
def test_prime_layout_sizes_vocabularies_candidates(graphs):
    g = graphs["prime"]
    assert (g.num_nodes, g.num_edges) == (len(fx.prime_nodes()), len(fx.prime_edges()))
    assert g.node_type_names == fx.PRIME_NODE_TYPES and g.relation_names == fx.PRIME_RELATIONS
    assert g.candidate_ids.tolist() == list(range(g.num_nodes))
    assert g.node_type_name(5) == "drug" and g.node_name(0) == "TP53"


def test_prime_document_drops_nan_and_id_keys_keeps_none(graphs):
    g = graphs["prime"]
    assert g.node_text(3) == (
        "- name: Li-Fraumeni syndrome\n- type: disease\n- source: MONDO\n- details:\n"
        "  - mondo_name: Li-Fraumeni syndrome\n  - group_name_bert: cancer\n"
        "  - mondo_definition: A cancer predisposition syndrome.\n"
        "  - orphanet_prevalence: 1-9 / 1 000 000\n  - orphanet_epidemiology: None\n"
        "  - orphanet_clinical_description: Early-onset tumours.\n  - mayo_causes: Inherited - TP53 variants.\n")
    # every detail skipped -> no "- details:" header at all
    assert g.node_text(4) == "- name: breast cancer\n- type: disease\n- source: MONDO_grouped\n"
    assert g.node_text(6) == "- name: Tamoxifen\n- type: drug\n- source: DrugBank\n"


def test_prime_gene_document_explains_keys_and_flattens_values(graphs):
    text = graphs["prime"].node_text(0)
    assert "_id" not in text and "_score" not in text and "entrezgene" not in text
    assert "  - genomic_pos (genomic position): {'chr': '17', 'end': 7687490, 'start': 7661779, 'strand': -1}\n" in text
    assert "  - generif (PubMed text): p53 binds DNA.; Mutated in - many cancers.\n" in text
    assert "  - interpro (protein family and classification information): ['p53 DNA-binding domain', 'p53 tetramerisation']\n" in text
    assert "  - HGNC: 11998\n" in text  # not an explained key: printed plainly
    # clean_dict drops '' / NaN / 'nan' (also inside dicts) and keeps None, ' ', [] and {}
    for kept in ("  - none: None\n", "  - space:  \n", "  - emptylist: []\n", "  - emptydict: {}\n",
                 "  - nested: {'c': 1}\n"):
        assert kept in text
    for dropped in ("empty:", "missing", "textnan"):
        assert dropped not in text
    assert "  - interpro (protein family and classification information): ['BRCT domain']\n" in graphs["prime"].node_text(1)


def test_mag_documents(graphs):
    g = graphs["mag"]
    assert g.node_type_names == stark.MAG_NODE_TYPES and g.relation_names == stark.MAG_RELATIONS
    assert g.node_text(0) == "- author name: Jure Leskovec\n- author paper count: 300\n- author citation count: 90000\n"
    assert g.node_text(1) == "- author name: COVIDUnknown9 Study Group\n- author paper count: 12\n"
    assert g.node_text(2) == "- author name: Unknown\n"
    assert g.node_text(6) == " - institution: Institute Unknown\n- institution citation count: 12\n"
    assert g.node_text(8) == " - field of study: SARS-CoVUnknown\n"
    papers = g.candidate_ids.tolist()
    assert papers == [i for i in range(g.num_nodes) if g.node_type_name(i) == "paper"] and len(papers) == 20
    p = papers[0]
    assert g.node_text(p) == (" - paper title: Inductive Representation Learning on Large Graphs\n"
                              " - abstract: We present GraphSAGE.\nIt scales.\n"
                              " - publication date: 2017-06-07\n - venue: Neural Information Processing Systems\n")
    # papers are not '-1'-replaced; the first known venue field wins; NaN is a known value
    assert g.node_text(p + 1).startswith(" - paper title: COVID-19 and graphs: a -1 study\n - abstract: Abstract with -1 kept.\n")
    assert g.node_text(p + 1).endswith(" - journal: Nature\n")
    assert g.node_text(p + 2).endswith(" - abstract: Text.\n - conference: KDD\n")
    assert g.node_text(p + 4) == " - paper title: No venue at all\n - abstract: \n - publication date: 2001-01-01\n"
    assert g.node_text(p + 5).endswith(" - journal: J. Graphs\n")
    assert g.node_text(p + 6).endswith(" - journal: nan\n")
    assert g.node_name(p) == "Inductive Representation Learning on Large Graphs" and g.node_name(0) == "Jure Leskovec"


def test_amazon_documents(graphs):
    g = graphs["amazon"]
    n_products = len(fx.amazon_products())
    assert g.candidate_ids.tolist() == list(range(n_products))
    assert g.node_type_names == ["product", "brand", "category", "color"]
    brand = g.names().index("Acme", n_products)
    assert g.node_text(brand) == "brand name: Acme" and g.node_type_name(brand) == "brand"
    assert g.node_text(g.num_nodes - 1) == "color name: red"
    assert g.node_text(1) == (
        "- product: Product 1\n- brand: Acme\n- dimensions: 10 x 5 x 2 inches\n- weight: 1.5 pounds\n"
        "- features: \n#3: Waterproof\n- reviews: \n"
        '#3:\nsummary: Summary 2\ntext: "Review text 2 - great."\n'
        '#1:\nsummary: Summary 0\ntext: "Review text 0 - great."\n'
        '#2:\nsummary: Summary 1\ntext: "Review text 1 - great."\n'
        '- Q&A: \n#1:\nquestion: "Question 0?"\nanswer: "Answer 0."\n')
    assert g.node_text(2) == "- product: Product 2\n- brand: Acme\n- features: \n#1: Feature of 2\n"
    assert g.node_text(3) == "- product: Product 3\n- brand: Acme\n- description: a s   a   s t r i n g\n"
    assert "- brand:" not in g.node_text(7)
    assert "- features: \n- reviews: \n" in g.node_text(6)  # header kept when every feature is filtered


def test_amazon_prints_27_reviews_by_votes_and_27_answers(graphs):
    text = graphs["amazon"].node_text(0)
    reviews = text.split("- reviews: \n")[1].split("- Q&A: \n")[0]
    shown = [int(line[1:-1]) - 1 for line in reviews.splitlines() if line.startswith("#")]
    assert len(shown) == 27 and len(set(shown)) == 27
    votes = [0 if v in (None,) or (isinstance(v, float) and np.isnan(v)) else int(v.replace(",", ""))
             for v in (r["vote"] for r in fx.amazon_products()[0]["review"])]
    assert [votes[i] for i in shown] == sorted((votes[i] for i in shown), reverse=True)
    assert votes[shown[0]] == 1234 and min(votes[i] for i in shown) >= sorted(votes, reverse=True)[26]
    qa = text.split("- Q&A: \n")[1]
    assert qa.count("question: ") == 27 and qa.endswith('#27:\nquestion: "Question 26?"\nanswer: "Answer 26."\n')


def test_edges_are_kept_as_stored(graphs):
    g = graphs["amazon"]
    e = g.neighbors(0)
    rows = {(int(n), g.relation_names[r], bool(o)) for n, r, o in zip(e.nodes, e.relations, e.outgoing)}
    assert {(1, "also_buy", True), (1, "also_view", False), (9, "also_buy", False)} <= rows
    mag = graphs["mag"]
    assert mag.num_edges == len(fx.mag_edges({"author": 5, "institution": 2, "field_of_study": 3}))


def _rows(g, v):
    e = g.neighbors(v)
    return {(int(n), g.relation_names[r], bool(o)) for n, r, o in zip(e.nodes, e.relations, e.outgoing)}


def test_stark_edges_merge_each_pair_whatever_its_directions(root, graphs):
    """edges="stark": stark-qa's to_undirected(reduce='mean'); AMAZON's 0 -also_buy-> 1 and
    1 -also_view-> 0 become also_buy both ways (floor of the mean of 0 and 1)."""
    g = stark.read_graph("amazon", root, edges="stark")
    assert g.meta["edges"] == "stark" and graphs["amazon"].meta["edges"] == "stored"
    rows = _rows(g, 0)
    assert (1, "also_buy", True) in rows and (0, "also_buy", True) in _rows(g, 1)   # one also_buy each way
    assert not any(n == 1 and r == "also_view" for n, r, _ in rows)
    assert all(out for _, _, out in rows)   # a node's neighbors are its own stored edges, as stark-qa reads them
    assert g.both_ways_relations == g.relation_names        # every pair stored both ways
    assert graphs["amazon"].both_ways_relations != graphs["amazon"].relation_names
    # MAG: the two papers that cite each other keep one cites edge each way
    mag_stored, mag = graphs["mag"], stark.read_graph("mag", root, edges="stark")
    p0 = int(mag_stored.candidate_ids[0])
    assert {(p0 + 1, "paper___cites___paper", True), (p0 + 1, "paper___cites___paper", False)} <= _rows(mag_stored, p0)
    assert "paper___cites___paper" not in mag_stored.both_ways_relations
    assert (p0 + 1, "paper___cites___paper", True) in _rows(mag, p0) and (p0, "paper___cites___paper", True) in _rows(mag, p0 + 1)
    for v in range(mag.num_nodes):   # the same neighbor sets either way; only relations/directions merge
        assert set(mag.neighbors(v).nodes.tolist()) == set(mag_stored.neighbors(v).nodes.tolist())


def test_stark_edges_leave_a_graph_stored_both_ways_as_it_is(root, graphs):
    g, stored = stark.read_graph("prime", root, edges="stark"), graphs["prime"]
    assert g.num_edges == stored.num_edges and g.fingerprint == stored.fingerprint
    assert stored.both_ways_relations == stored.relation_names   # PRIME stores every edge both ways


def test_stark_undirected_floors_the_mean_type_of_each_ordered_pair():
    src, dst, rel = stark.stark_undirected(np.array([0, 1, 2, 0, 4]), np.array([1, 0, 3, 4, 0]),
                                           np.array([0, 1, 5, 1, 2]), 5)
    got = sorted(zip(src.tolist(), dst.tolist(), rel.tolist()))
    # (0,1): types 0 and 1 -> 0; (2,3): 5; (0,4): 0 -1-> 4 and 4 -2-> 0 -> floor(1.5) = 1
    assert got == [(0, 1, 0), (0, 4, 1), (1, 0, 0), (2, 3, 5), (3, 2, 5), (4, 0, 1)]
    same = (np.array([0, 1, 0, 1]), np.array([1, 0, 1, 0]), np.array([2, 3, 3, 2]))   # symmetric: untouched
    assert [a.tolist() for a in stark.stark_undirected(*same, 2)] == [a.tolist() for a in same]
    # every pair stored both ways, but (0, 1) twice and (1, 0) once: not symmetric as a multiset (torch
    # geometric's is_undirected), so merged; types 2, 3, 3 in both directions -> floor(8/3) = 2 each way
    unbalanced = (np.array([0, 1, 0]), np.array([1, 0, 1]), np.array([2, 3, 3]))
    got = stark.stark_undirected(*unbalanced, 2)
    assert sorted(zip(*(a.tolist() for a in got))) == [(0, 1, 2), (1, 0, 2)]
    with pytest.raises(ValueError, match="valid: stored, stark"):
        stark.read_graph("prime", "nowhere", edges="undirected")


def test_demo_name_reads_the_prime_layout(tmp_path):
    fx.build_prime(tmp_path, name="demo")
    fx.build_qa(tmp_path, "demo", 30, with_optional=False)
    g = stark.read_graph("demo", tmp_path)
    assert g.name == "demo" and g.node_text(4) == "- name: breast cancer\n- type: disease\n- source: MONDO_grouped\n"
    qs = stark.read_queries("demo", tmp_path)
    assert qs.split_names() == ["train", "val", "test"]


# ---------------------------------------------------------------------- bad input
def test_unknown_graph_name_lists_valid_ones(root):
    with pytest.raises(ValueError, match="valid graphs: amazon, mag, prime, demo"):
        stark.read_graph("primekg", root)


@pytest.mark.parametrize("name,file", [("prime", "edge_types.pt"), ("mag", "node_info.pkl"),
                                       ("amazon", "node_type_dict.pkl")])
def test_missing_file_names_file_and_fetch_command(root, tmp_path, name, file):
    r = _copy(root, tmp_path)
    (stark.graph_dir(name, r) / file).unlink()
    with pytest.raises(FileNotFoundError) as err:
        stark.read_graph(name, r)
    assert file in str(err.value) and f"ark download {name} --root {r.parent}" in str(err.value)
    assert stark.missing_files(name, r) == [f"skb/{name}/processed.zip"]


@pytest.mark.parametrize("file", ["node_info.pkl", "edge_index.pt", "node_type_dict.pkl"])
def test_truncated_file_is_reported(root, tmp_path, file):
    r = _copy(root, tmp_path)
    path = stark.graph_dir("prime", r) / file
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(stark.StarkFileError, match="truncated or corrupted") as err:
        stark.read_graph("prime", r)
    assert str(path) in str(err.value) and "ark download prime --root" in str(err.value)


def test_inconsistent_files_are_reported(root, tmp_path):
    import torch

    r = _copy(root, tmp_path)
    torch.save(torch.LongTensor([0, 1]), stark.graph_dir("prime", r) / "edge_types.pt")
    with pytest.raises(stark.StarkFileError, match="edge_index.pt has shape"):
        stark.read_graph("prime", r)
    torch.save(torch.LongTensor([0, 1]), stark.graph_dir("mag", r) / "node_types.pt")
    with pytest.raises(stark.StarkFileError, match="node_info.pkl has 30 nodes but node_types.pt has 2"):
        stark.read_graph("mag", r)


# ---------------------------------------------------------------------- queries
def test_queries_and_split_positions(root):
    qs = stark.read_queries("prime", root)
    csv = __import__("pandas").read_csv(stark.qa_files("prime", root)["queries"])
    assert len(qs) == 30 and qs.ids() == sorted(csv["id"].tolist())
    first = csv.iloc[0]
    q = qs[int(first["id"])]
    assert q.text == first["query"] and list(q.answer_ids) == eval(first["answer_ids"])
    test_ids = [int(x) for x in stark.qa_files("prime", root)["test"].read_text().split()]
    assert [q.id for q in qs.split("test")] == test_ids  # file order kept, ids not positions
    assert qs.positions("test").tolist() == [sorted(test_ids + [i for i in qs.ids() if i not in test_ids]).index(i)
                                             for i in test_ids]
    assert len(qs.split("test-0.1")) == 3
    human = qs.split("human_generated_eval")
    assert [h.id for h in human] == [0, 3, 101] and human[2].text == "Human query 101"
    assert qs[101].text != "Human query 101"  # the main set owns ids; human ids may collide


def test_query_errors(root, tmp_path):
    qs = stark.read_queries("amazon", root)
    with pytest.raises(ValueError, match="valid splits: train, val, test, test-0.1, human_generated_eval"):
        qs.split("dev")
    with pytest.raises(KeyError, match="no query with id 5"):
        qs[5]
    r = _copy(root, tmp_path)
    files = stark.qa_files("mag", r)
    files["test-0.1"].unlink()
    with pytest.raises(FileNotFoundError, match=r"test-0\.1\.index.*ark download mag --root"):
        stark.read_queries("mag", r)
    files["test-0.1"].write_text("999\n")
    with pytest.raises(stark.StarkFileError, match=r"query ids not in stark_qa\.csv: \[999\]"):
        stark.read_queries("mag", r)


# ---------------------------------------------------------------------- download
def test_download_with_files_present_touches_no_network(root, monkeypatch):
    import huggingface_hub

    def boom(*a, **k):
        raise AssertionError("hub called although every file is on disk")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", boom)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", boom)
    for name in stark.STARK_GRAPHS:
        assert stark.missing_files(name, root) == []
        assert stark.download(name, root, progress=False) == root


def test_hub_files_are_what_stark_qa_asks_for():
    # AmazonSKB asks for category_list.json, then processed.zip; STaRKDataset for the whole qa/<name>/
    # folder (the comparison tier records stark-qa's own requests against a local hub and checks these)
    assert stark.hub_files("amazon") == ["skb/amazon/category_list.json", "skb/amazon/processed.zip", "qa/amazon/"]
    assert stark.hub_files("mag") == ["skb/mag/processed.zip", "skb/mag/schema/", "qa/mag/"]
    with pytest.raises(ValueError, match="downloadable graphs: prime, mag, amazon"):
        stark.hub_files("demo")


def _fake_hub(source: Path, calls: list):
    """Stand-in for the hub (no network here): serves files from a local tree in the hub layout,
    zipping ``skb/<name>/processed`` on request as the hub's processed.zip."""

    def hf_hub_download(repo_id, filename, repo_type=None, local_dir=None, **kw):
        assert (repo_id, repo_type) == ("snap-stanford/stark", "dataset")
        calls.append(filename)
        dest = Path(local_dir) / filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        if filename.endswith("processed.zip"):
            folder = source / Path(filename).parent / "processed"
            with zipfile.ZipFile(dest, "w") as zf:
                for p in sorted(folder.rglob("*")):
                    zf.write(p, Path("processed") / p.relative_to(folder))
        else:
            shutil.copy(source / filename, dest)
        return str(dest)

    def snapshot_download(repo_id, repo_type=None, allow_patterns=(), local_dir=None, **kw):
        prefix = allow_patterns[0].rstrip("*")
        calls.append(prefix)
        shutil.copytree(source / prefix, Path(local_dir) / prefix, dirs_exist_ok=True)
        return str(local_dir)

    return hf_hub_download, snapshot_download


@pytest.mark.parametrize("name", stark.STARK_GRAPHS)
def test_download_fetches_missing_files_and_unzips(root, tmp_path, monkeypatch, name):
    import huggingface_hub

    calls: list = []
    get, snap = _fake_hub(root, calls)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", get)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snap)
    target = tmp_path / "stark"
    stark.download(name, target, progress=False)
    assert calls == stark.hub_files(name)
    assert not (target / "skb" / name / "processed.zip").exists()  # unzipped, then removed
    assert stark.read_graph(name, target).num_nodes == stark.read_graph(name, root).num_nodes
    calls.clear()
    (target / "qa" / name / "split" / "val.index").unlink()
    stark.download(name, target, progress=False)
    assert calls == [f"qa/{name}/"]


def test_truncated_zip_is_reported_and_removed(tmp_path, monkeypatch):
    import huggingface_hub

    def truncated(repo_id, filename, repo_type=None, local_dir=None, **kw):
        dest = Path(local_dir) / filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(b"PK\x03\x04 not a whole zip")
        return str(dest)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", truncated)
    with pytest.raises(stark.StarkFileError, match=r"processed\.zip is truncated or corrupted.*ark download prime --root"):
        stark.download("prime", tmp_path, progress=False)
    assert not (tmp_path / "skb" / "prime" / "processed.zip").exists()


def test_ark_download_check(root, tmp_path, capsys):
    from ark.cli.main import main

    data = tmp_path / "data"          # the data root: STaRK's files under data/stark
    data.mkdir()
    (data / "stark").symlink_to(root)
    assert main(["download", "mag", "--check", "--root", str(data)]) == 0
    assert json.loads(capsys.readouterr().out) == {"graph": "mag", "root": str(data / "stark"), "missing": []}
    assert main(["download", "prime", "--check", "--root", str(tmp_path / "empty")]) == 1
    assert "skb/prime/processed.zip" in capsys.readouterr().out
    assert stark.missing_paths("prime", tmp_path)[:1] == ["skb/prime/processed/node_info.pkl"]
