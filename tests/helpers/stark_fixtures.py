"""Small STaRK datasets in the three processed layouts (PRIME, MAG, AMAZON), written like STaRK's files.

`build(root)` writes, under ``root`` in the hub layout that `ark.data.stark` reads::

    skb/prime/processed/*.pkl|*.pt                       (PrimeSKB's save_files: dict -> pickle, tensor -> torch.save)
    skb/mag/processed/*.pt|node_info.pkl, skb/mag/schema/mag.json
    skb/amazon/processed/cache/brand-category-color/*,   skb/amazon/category_list.json
    qa/<name>/stark_qa/stark_qa.csv, stark_qa_human_generated_eval.csv, qa/<name>/split/*.index

Each graph has a few dozen nodes and the odd cases stark-qa's ``get_doc_info`` treats specially (see
/work/shared/notes/stark-facts.md): NaN and 'nan' values, None, ' ', [] and {}, keys containing
``_id``, MAG's '-1', AMAZON products with more than 27 reviews (tied votes) and Q&As. The expected
documents are NOT written here: the comparison tier checks them against stark-qa itself, and
tests/test_stark.py checks hand-picked ones.

    python -m tests.helpers.stark_fixtures /tmp/stark-fixtures     # write them somewhere to look at
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

NAN = float("nan")

PRIME_NODE_TYPES = ["disease", "gene/protein", "molecular_function", "drug", "pathway", "anatomy",
                    "effect/phenotype", "biological_process", "cellular_component", "exposure"]
PRIME_RELATIONS = ["ppi", "carrier", "enzyme", "target", "transporter", "contraindication", "indication",
                   "off-label use", "synergistic interaction", "associated with", "parent-child",
                   "phenotype absent", "phenotype present", "side effect", "interacts with", "linked to",
                   "expression present", "expression absent"]


def _save(folder: Path, **files) -> None:
    """Write files the way stark-qa's ``save_files`` does: dict -> ``<key>.pkl``, tensor -> ``<key>.pt``."""
    folder.mkdir(parents=True, exist_ok=True)
    for key, value in files.items():
        if isinstance(value, dict):
            with open(folder / f"{key}.pkl", "wb") as f:
                pickle.dump(value, f)
        else:
            torch.save(value, folder / f"{key}.pt")


def _edges(triples: list[tuple[int, int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    src, dst, rel = zip(*triples)
    return torch.LongTensor([list(src), list(dst)]), torch.LongTensor(list(rel))


# ---------------------------------------------------------------------- PRIME
def prime_nodes() -> list[dict]:
    gene_details = {
        "_id": "7157", "_score": 20.1, "name": "tumor protein p53", "type_of_gene": "protein-coding",
        "alias": ["BCC7", "LFS1", "P53"], "other_names": ["cellular tumor antigen p53", "antigen NY-CO-13"],
        "genomic_pos": [{"chr": "17", "end": 7687490, "start": 7661779, "strand": -1},
                        {"chr": "17", "end": 1, "start": 0, "strand": -1}],
        "generif": [{"pubmed": 1, "text": "p53 binds DNA."}, {"pubmed": 2, "text": "Mutated in - many cancers."}],
        "interpro": [{"desc": "p53 DNA-binding domain", "id": "IPR011615"}, {"desc": "p53 tetramerisation", "id": "IPR010991"}],
        "summary": "This gene encodes a tumor suppressor protein. Also: NaN, -1 and nan stay as text.",
        "entrezgene_id": "7157", "HGNC": "11998", "empty": "", "missing": NAN, "textnan": "nan",
        "none": None, "space": " ", "emptylist": [], "emptydict": {}, "nested": {"a": NAN, "b": "nan", "c": 1},
    }
    gene2 = {"name": "BRCA1 DNA repair associated", "interpro": {"desc": "BRCT domain", "id": "IPR001357"},
             "genomic_pos": {"chr": "17", "start": 43044295}, "generif": [{"text": "one " * 5}]}
    disease = {"mondo_id": 1234, "mondo_name": "Li-Fraumeni syndrome", "group_id_bert": NAN,
               "group_name_bert": "cancer", "mondo_definition": "A cancer predisposition syndrome.",
               "umls_description": NAN, "orphanet_definition": "nan", "orphanet_prevalence": "1-9 / 1 000 000",
               "orphanet_epidemiology": None, "orphanet_clinical_description": "Early-onset tumours.",
               "mayo_symptoms": np.float64(NAN), "mayo_causes": "Inherited - TP53 variants."}
    drug = {"description": "An alkylating agent.", "half_life": "1.5 hours", "indication": NAN,
            "mechanism_of_action": "Cross-links DNA.", "protein_binding": np.float64(0.25),
            "pharmacodynamics": "nan", "state": "solid", "atc_1": "L", "atc_2": "L01", "category": ["a", "b"],
            "group": "approved; investigational", "pathway": NAN, "molecular_weight": np.float64(299.5),
            "tpsa": np.int64(3), "clogp": [np.float64(1.5), "x"]}
    nodes = [
        {"id": "7157", "type": "gene/protein", "name": "TP53", "source": "NCBI", "details": gene_details},
        {"id": "672", "type": "gene/protein", "name": "BRCA1", "source": "NCBI", "details": gene2},
        {"id": "675", "type": "gene/protein", "name": "BRCA2", "source": "NCBI"},
        {"id": "11111", "type": "disease", "name": "Li-Fraumeni syndrome", "source": "MONDO", "details": disease},
        {"id": "22222", "type": "disease", "name": "breast cancer", "source": "MONDO_grouped",
         "details": {"mondo_id": 5, "_hidden": "x", "umls_description": NAN}},  # every detail skipped
        {"id": "DB00001", "type": "drug", "name": "Cyclophosphamide", "source": "DrugBank", "details": drug},
        {"id": "DB00002", "type": "drug", "name": "Tamoxifen", "source": "DrugBank", "details": {}},
        {"id": "GO:0003677", "type": "molecular_function", "name": "DNA binding", "source": "GO",
         "details": {"go_id": "GO:0003677", "definition": "Any molecular function by which a gene product "
                     "interacts selectively with DNA.", "synonyms": ["DNA binding activity"]}},
        {"id": "GO:0006915", "type": "biological_process", "name": "apoptotic process", "source": "GO",
         "details": {"definition": "A programmed cell death process.", "comment": NAN}},
        {"id": "GO:0005634", "type": "cellular_component", "name": "nucleus", "source": "GO"},
        {"id": "R-HSA-1", "type": "pathway", "name": "p53 signalling", "source": "REACTOME",
         "details": {"dbId": 1, "displayName": "p53 signalling", "stId": "R-HSA-1", "speciesName": "Homo sapiens",
                     "summation": "The p53 pathway - responds to stress.", "isInDisease": False}},
        {"id": "UBERON:1", "type": "anatomy", "name": "breast", "source": "UBERON"},
        {"id": "HP:0000001", "type": "effect/phenotype", "name": "Neoplasm", "source": "HPO",
         "details": {"definition": None}},
        {"id": "HP:0000002", "type": "effect/phenotype", "name": "Breast carcinoma", "source": "HPO"},
        {"id": "CTD:1", "type": "exposure", "name": "benzene", "source": "CTD", "details": {"x": " "}},
    ]
    for i in range(15):  # a tail of plain phenotypes
        nodes.append({"id": f"HP:{100 + i}", "type": "effect/phenotype", "name": f"phenotype {i}", "source": "HPO",
                      "details": {"definition": f"Definition {i} - with a dash."} if i % 2 else {}})
    return nodes


def prime_edges() -> list[tuple[int, int, int]]:
    R = PRIME_RELATIONS.index
    one_way = [
        (0, 1, R("ppi")), (0, 2, R("ppi")), (3, 0, R("associated with")), (4, 1, R("associated with")),
        (4, 2, R("associated with")), (5, 3, R("indication")), (6, 4, R("indication")), (5, 6, R("synergistic interaction")),
        (0, 7, R("interacts with")), (0, 8, R("interacts with")), (0, 9, R("interacts with")),
        (0, 10, R("interacts with")), (11, 1, R("expression present")), (3, 12, R("phenotype present")),
        (4, 13, R("phenotype present")), (12, 13, R("parent-child")), (14, 3, R("linked to")),
        (5, 12, R("side effect")), (0, 5, R("target")), (0, 3, R("associated with")),  # 0-3 twice, same type
        (6, 6, R("synergistic interaction")),  # a self loop
    ]
    for i in range(15, 30):
        one_way.append((12, i, R("parent-child")))
    return one_way + [(d, s, r) for s, d, r in one_way if s != d]  # PRIME stores every edge both ways


def build_prime(root: Path, name: str = "prime") -> Path:
    nodes = prime_nodes()
    edge_index, edge_types = _edges(prime_edges())
    folder = root / "skb" / name / "processed"
    _save(folder,
          node_info={i: n for i, n in enumerate(nodes)},
          edge_index=edge_index, edge_types=edge_types,
          edge_type_dict=dict(enumerate(PRIME_RELATIONS)),
          node_types=torch.LongTensor([PRIME_NODE_TYPES.index(n["type"]) for n in nodes]),
          node_type_dict=dict(enumerate(PRIME_NODE_TYPES)))
    return folder


# ---------------------------------------------------------------------- MAG
def _author(name, papers, cites, i):
    return {"id": i, "mag_id": 1000 + i, "Rank": 9000, "DisplayName": name, "LastKnownAffiliationId": -1,
            "PaperCount": papers, "CitationCount": cites, "type": "author"}


def _paper(i, title, abstract, date=-1, venue=-1, journal=-1, series=-1, instance=-1):
    return {"id": i, "mag_id": 5000 + i, "PaperRank": 20000, "DocType": "Journal", "Year": 2020,
            "Date": date, "OriginalVenue": venue, "JournalDisplayName": journal, "ConferenceSeriesDisplayName": series,
            "ConferenceInstancesDisplayName": instance, "PaperCitationCount": 3, "title": title,
            "abstract": abstract, "type": "paper"}


def mag_nodes() -> list[dict]:
    authors = [
        _author("Jure Leskovec", 300, 90000, 0),
        _author("COVID-19 Study Group", 12, -1, 1),  # '-1' inside a name -> 'COVIDUnknown9'
        _author(-1, -1, -1, 2),                       # unknown name, no counts
        _author("A. Nonymous", 0, 0, 3),
        _author("Ada -1 Lovelace", NAN, 5, 4),        # NaN count prints as nan
    ]
    institutions = [
        {"id": 0, "mag_id": 77, "Rank": 1, "DisplayName": "Stanford University", "PaperCount": 100000,
         "CitationCount": 5000000, "type": "institution"},
        {"id": 1, "mag_id": 78, "Rank": 2, "DisplayName": "Institute -1", "PaperCount": -1,
         "CitationCount": 12, "type": "institution"},
    ]
    fields = [
        {"id": 0, "mag_id": 90, "Rank": 3, "DisplayName": "Graph neural network", "MainType": "x", "Level": 2,
         "PaperCount": 4000, "CitationCount": -1, "type": "field_of_study"},
        {"id": 1, "mag_id": 91, "Rank": 4, "DisplayName": "SARS-CoV-1", "MainType": -1, "Level": 1,
         "PaperCount": -1, "CitationCount": -1, "type": "field_of_study"},
        {"id": 2, "mag_id": 92, "Rank": 5, "DisplayName": "Machine learning", "MainType": -1, "Level": 0,
         "PaperCount": 10, "CitationCount": 20, "type": "field_of_study"},
    ]
    papers = [
        _paper(0, "Inductive Representation Learning on Large Graphs", "We present GraphSAGE.\r\nIt scales.\n\n",
               date="2017-06-07", venue="Neural Information Processing Systems"),
        _paper(1, "COVID-19 and graphs: a -1 study", "Abstract with -1 kept.", date="2020-01-01", journal="Nature"),
        _paper(2, "Conference series paper", "Text.", series="KDD"),
        _paper(3, "Conference instance paper", "Text\r.", date=-1, instance="KDD 2019"),
        _paper(4, "No venue at all", "", date="2001-01-01"),
        _paper(5, "String minus one venue", "Abstract.", venue="-1", journal="J. Graphs"),
        _paper(6, "NaN journal", "Abstract.", journal=NAN),
    ]
    for k in range(7, 20):
        papers.append(_paper(k, f"Paper {k}", f"Abstract of paper {k} - on graphs.", date=f"2019-01-{k:02d}",
                             venue=-1 if k % 3 else "ICML", journal="JMLR" if k % 2 else -1))
    return authors + institutions + fields + papers


def mag_edges(counts: dict[str, int]) -> list[tuple[int, int, int]]:
    a0, i0, f0, p0 = 0, counts["author"], counts["author"] + counts["institution"], \
        counts["author"] + counts["institution"] + counts["field_of_study"]
    aff, cites, topic, writes = range(4)
    e = [(a0 + 0, i0 + 0, aff), (a0 + 1, i0 + 1, aff), (a0 + 3, i0 + 0, aff), (a0 + 4, i0 + 0, aff)]
    e += [(p0 + 0, p0 + 1, cites), (p0 + 1, p0 + 0, cites), (p0 + 2, p0 + 0, cites), (p0 + 3, p0 + 2, cites)]
    e += [(p0 + 0, f0 + 0, topic), (p0 + 1, f0 + 1, topic), (p0 + 0, f0 + 2, topic), (p0 + 5, f0 + 2, topic)]
    e += [(a0 + 0, p0 + 0, writes), (a0 + 1, p0 + 1, writes), (a0 + 2, p0 + 1, writes), (a0 + 0, p0 + 3, writes)]
    for k in range(7, 20):
        e.append((p0 + k, p0 + (k * 7) % 20, cites))
        e.append((a0 + k % 5, p0 + k, writes))
        e.append((p0 + k, f0 + k % 3, topic))
    return e


def build_mag(root: Path) -> Path:
    nodes = mag_nodes()
    types = ["author", "institution", "field_of_study", "paper"]
    counts = {t: sum(n["type"] == t for n in nodes) for t in types}
    edge_index, edge_types = _edges(mag_edges(counts))
    folder = root / "skb" / "mag" / "processed"
    _save(folder, node_info={i: n for i, n in enumerate(nodes)}, edge_index=edge_index, edge_types=edge_types,
          node_types=torch.tensor([types.index(n["type"]) for n in nodes]))
    schema = root / "skb" / "mag" / "schema"
    schema.mkdir(parents=True, exist_ok=True)
    (schema / "mag.json").write_text(json.dumps({"Authors": ["AuthorId", "Rank", "DisplayName"]}))
    return folder


# ---------------------------------------------------------------------- AMAZON
def _review(i: int, vote) -> dict:
    return {"reviewerID": f"R{i}", "summary": f"Summary {i}", "style": NAN if i % 2 else {"Color:": " Red"},
            "reviewText": f"Review text {i} - great.", "vote": vote, "overall": np.float64(5.0 - i % 5),
            "verified": bool(i % 2), "reviewTime": "01 2, 2015"}


def _qa(i: int) -> dict:
    return {"questionType": "yes/no", "answerType": "Y", "question": f"Question {i}?", "answer": f"Answer {i}.",
            "answerTime": "Jan 1, 2015"}


def _product(i: int, **kw) -> dict:
    info = {"review": [], "qa": [], "asin": f"B{i:09d}", "title": f"Product {i}", "global_category": "Sports and Outdoors",
            "category": ["outdoor recreation"], "price": "$10.00", "brand": "Acme", "feature": [f"Feature of {i}"],
            "rank": "1 in Sports", "details": {"product_dimensions": "10 x 5 x 2 inches ; 1.5 pounds",
                                               "shipping_weight": "2 pounds"},
            "description": [f"Description of product {i}."]}
    info.update(kw)
    return info


def amazon_products() -> list[dict]:
    votes = ["1,234", None, NAN, "3", "3", "12", "0", "3"]
    many_reviews = [_review(i, votes[i % len(votes)]) for i in range(40)]  # > 27 reviews, tied votes
    return [
        _product(0, review=many_reviews, qa=[_qa(i) for i in range(31)], color=["red", "blue"]),  # > 27 Q&As
        _product(1, review=[_review(0, "2"), _review(1, NAN), _review(2, "10")], qa=[_qa(0)],
                 feature=["Has an ASIN: B000", "", "Waterproof", "asin lower"], description=[" ", " "]),
        _product(2, details={"product_dimensions": "no separator here"}, description=[]),
        _product(3, details="a string, not a dict", feature=[], description="as a string"),
        _product(4, details={"product_dimensions": NAN}, category=["outdoor recreation", "camping & hiking"]),
        _product(5, details={"product_dimensions": "1 ; 2 ; 3"}, description=["  padded  ", "two"]),
        _product(6, title="Product - with -1 dash", feature=["ASIN only"], review=[_review(i, "5") for i in range(30)]),
        {k: v for k, v in _product(7).items() if k != "brand"},  # no brand key
        _product(8, description=["nan"], feature=[None, "ok"], review=[_review(0, None)]),
        _product(9, brand="Zeta", color=["blue"], details={}),
    ] + [_product(i, review=[_review(j, str(j % 4)) for j in range(i)], brand="Acme" if i % 2 else "Zeta")
         for i in range(10, 24)]


def build_amazon(root: Path) -> Path:
    products = amazon_products()
    node_info = {i: p for i, p in enumerate(products)}
    node_types = [0] * len(products)
    n = len(products)
    triples = [(0, 1, 0), (1, 0, 1), (0, 2, 1), (2, 3, 0), (3, 2, 0), (4, 5, 1), (5, 6, 0), (7, 8, 1), (9, 0, 0)]
    triples += [(i, (i + 3) % n, i % 2) for i in range(10, n)]
    # meta links as AmazonSKB.post_process adds them: one node per distinct value, type by link
    for t, (link, key) in enumerate((("brand", "brand"), ("category", "category"), ("color", "color")), start=1):
        values = sorted({v for p in products if key in p
                         for v in ([p[key]] if isinstance(p[key], str) else p[key])})
        for v in values:
            node_info[len(node_info)] = {f"{link}_name": v}
            node_types.append(t)
            vid = len(node_info) - 1
            for pid, p in enumerate(products):
                if key in p and v in ([p[key]] if isinstance(p[key], str) else p[key]):
                    triples.append((pid, vid, 1 + t))
    edge_index, edge_types = _edges(triples)
    folder = root / "skb" / "amazon" / "processed" / "cache" / "brand-category-color"
    _save(folder, node_info=node_info, edge_index=edge_index, edge_types=edge_types,
          edge_type_dict={0: "also_buy", 1: "also_view", 2: "has_brand", 3: "has_category", 4: "has_color"},
          node_type_dict={0: "product", 1: "brand", 2: "category", 3: "color"},
          node_types=torch.LongTensor(node_types))
    (root / "skb" / "amazon" / "category_list.json").write_text(json.dumps(["outdoor recreation", "camping & hiking"]))
    return folder


# ---------------------------------------------------------------------- QA
def build_qa(root: Path, name: str, num_nodes: int, with_optional: bool = True) -> Path:
    """A QA set in STaRK's format: ids are not 0..n-1 and not in row order; split files hold query ids."""
    rng = np.random.default_rng(7)
    ids = [int(x) for x in rng.permutation(np.arange(100, 130))]
    rows = [{"id": qid, "query": f'Query {qid}: which nodes, "quoted", with commas, ok?',
             "answer_ids": str([int(a) for a in sorted(rng.choice(num_nodes, size=1 + qid % 3, replace=False))])}
            for qid in ids]
    qa = root / "qa" / name
    (qa / "stark_qa").mkdir(parents=True, exist_ok=True)
    (qa / "split").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(qa / "stark_qa" / "stark_qa.csv", index=False)
    splits = {"train": ids[:15], "val": ids[15:20], "test": ids[20:], "test-0.1": ids[20:23]}
    for s, members in splits.items():
        if s == "test-0.1" and not with_optional:
            continue
        (qa / "split" / f"{s}.index").write_text("\n".join(map(str, members)) + "\n")
    if with_optional:  # human-generated: ids overlap the main set's on purpose
        human = [{"id": k, "query": f"Human query {k}", "answer_ids": str([k % num_nodes])} for k in (3, 0, 101)]
        pd.DataFrame(human).to_csv(qa / "stark_qa" / "stark_qa_human_generated_eval.csv", index=False)
    return qa


def build(root: Path | str) -> Path:
    """Write all three fixture graphs and their QA sets under ``root``; return ``root``."""
    root = Path(root)
    build_prime(root)
    build_mag(root)
    build_amazon(root)
    build_qa(root, "prime", len(prime_nodes()))
    build_qa(root, "mag", len(mag_nodes()))
    build_qa(root, "amazon", len(amazon_products()))
    return root


def build_hub_repo(repo: Path | str, processed: Path | str | None = None) -> Path:
    """The dataset repo ``snap-stanford/stark`` in the hub's own layout, for a local hub stand-in
    (tests/helpers/hub_server.py): each graph's ``processed/`` folder zipped as ``skb/<name>/processed.zip``
    (entries under ``processed/``, as stark-qa extracts them into ``skb/<name>``), MAG's ``schema/``,
    AMAZON's ``category_list.json``, the QA csv files and split indices. Files of the real repo that
    neither stark-qa's processed path nor ark fetch (raw dumps) are there too, as small stand-ins.
    ``processed``: a tree written by `build` to zip (default: written here first)."""
    import shutil
    import tempfile
    import zipfile

    repo = Path(repo)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(processed) if processed is not None else build(Path(tmp) / "stark")
        for name in ("prime", "mag", "amazon"):
            folder = src / "skb" / name / "processed"
            (repo / "skb" / name).mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(repo / "skb" / name / "processed.zip", "w", zipfile.ZIP_DEFLATED) as zf:
                for f in sorted(folder.rglob("*")):
                    if f.is_file():
                        zf.write(f, Path("processed") / f.relative_to(folder))
            shutil.copytree(src / "qa" / name, repo / "qa" / name)
        shutil.copytree(src / "skb" / "mag" / "schema", repo / "skb" / "mag" / "schema")
        shutil.copy(src / "skb" / "amazon" / "category_list.json", repo / "skb" / "amazon" / "category_list.json")
    for raw in ("skb/prime/raw.zip", "skb/mag/idx_title_abs.zip", "skb/amazon/raw/readme.txt"):
        (repo / raw).parent.mkdir(parents=True, exist_ok=True)
        (repo / raw).write_bytes(b"raw files are not part of the processed path")
    return repo


if __name__ == "__main__":
    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else "stark-fixtures")))
