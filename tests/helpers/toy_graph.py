"""A hand-written toy knowledge graph (12 nodes, 4 node types, 5 relations) for unit tests.

Edges are listed below as stored (directed); `EXPECTED` in tests/test_graph.py is computed by hand from
this listing. ``python -m tests.helpers.toy_graph`` prints it.
"""

from __future__ import annotations

import pytest

from ark.data.graph import KnowledgeGraph
from ark.search.bm25 import BM25Index

NODE_TYPES = ["disease", "gene/protein", "drug", "effect/phenotype"]
RELATIONS = ["associated with", "indication", "phenotype present", "parent-child", "target"]

# (name, type, description)
NODES = [
    ("Marfan syndrome", "disease", "A connective tissue disorder affecting the heart, eyes, blood vessels and skeleton; tall stature and long fingers."),
    ("Ehlers-Danlos syndrome", "disease", "A group of inherited disorders of collagen with stretchy skin and loose joints."),
    ("Long QT syndrome", "disease", "A heart rhythm disorder with prolonged repolarisation that can cause fainting and sudden death."),
    ("FBN1", "gene/protein", "Fibrillin 1, an extracellular matrix glycoprotein forming microfibrils in connective tissue."),
    ("COL5A1", "gene/protein", "Collagen type V alpha 1 chain, a fibrillar collagen of skin and joints."),
    ("KCNH2", "gene/protein", "Potassium voltage-gated channel subfamily H member 2, the hERG channel of the heart."),
    ("Losartan", "drug", "An angiotensin II receptor blocker used for hypertension and studied for aortic dilation."),
    ("Propranolol", "drug", "A non-selective beta blocker that slows the heart rate and lowers blood pressure."),
    ("Aortic root aneurysm", "effect/phenotype", "Dilation of the aortic root, the part of the aorta attached to the heart."),
    ("Joint hypermobility", "effect/phenotype", "Joints that move beyond the normal range; loose joints."),
    ("Syncope", "effect/phenotype", "Transient loss of consciousness from reduced blood flow to the brain; fainting."),
    ("Abnormality of the cardiovascular system", "effect/phenotype", "Any anomaly of the heart or blood vessels."),
]

# (source, relation, target) as stored
EDGES = [
    (3, "associated with", 0),
    (0, "associated with", 3),
    (4, "associated with", 1),
    (5, "associated with", 2),
    (3, "associated with", 8),
    (6, "indication", 0),
    (7, "indication", 2),
    (7, "indication", 0),
    (0, "phenotype present", 8),
    (0, "phenotype present", 9),
    (1, "phenotype present", 9),
    (2, "phenotype present", 10),
    (11, "parent-child", 8),
    (11, "parent-child", 10),
    (7, "target", 5),
]


def toy_text(name: str, type_: str, description: str) -> str:
    return f"- name: {name}\n- type: {type_}\n- description: {description}\n"


def toy_graph(name: str = "toy") -> KnowledgeGraph:
    """Build the toy graph; candidates are all nodes."""
    return KnowledgeGraph.from_edges(
        name=name,
        node_type_names=NODE_TYPES,
        node_types=[NODE_TYPES.index(t) for _, t, _ in NODES],
        names=[n for n, _, _ in NODES],
        texts=[toy_text(*node) for node in NODES],
        relation_names=RELATIONS,
        src=[s for s, _, _ in EDGES],
        dst=[d for _, _, d in EDGES],
        rel=[RELATIONS.index(r) for _, r, _ in EDGES],
        source_fingerprint="toy-v1",
    )


if __name__ == "__main__":
    print(toy_graph())


@pytest.fixture(scope="module")
def graph():
    """The toy graph, once per test module that imports this fixture."""
    return toy_graph()


@pytest.fixture(scope="module")
def index(graph):
    """A BM25 index over the toy graph's documents."""
    return BM25Index.build(graph.texts())


@pytest.fixture(scope="module")
def toolset(graph, index):
    """The full toolset (paper defaults) over the toy graph."""
    from ark.tools import ToolConfig, ToolSet

    return ToolSet(graph, index, ToolConfig())
