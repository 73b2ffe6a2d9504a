"""STaRK's raw files: download them from the hub, read the processed graphs and the QA sets.

This module owns everything that knows STaRK's on-disk layout (the hub layout of the dataset repo
``snap-stanford/stark``, kept as is under one root, by default ``<ARK_HOME>/stark``, `ark.home`)::

    skb/prime/processed/{node_info.pkl, edge_index.pt, edge_types.pt, node_types.pt,
                         edge_type_dict.pkl, node_type_dict.pkl}
    skb/mag/processed/{node_info.pkl, edge_index.pt, edge_types.pt, node_types.pt}   + skb/mag/schema/
    skb/amazon/processed/cache/brand-category-color/{the six files above}  + skb/amazon/category_list.json
    skb/demo/processed/...            (the bundled demo graph, PRIME's layout, built by ark.data.demo)
    qa/<name>/stark_qa/stark_qa.csv, qa/<name>/stark_qa/stark_qa_human_generated_eval.csv
    qa/<name>/split/{train,val,test,test-0.1}.index

* `download` asks the hub for exactly what stark-qa 1.1.0 asks for (``processed.zip``, MAG's
  ``schema/``, AMAZON's ``category_list.json``, the whole ``qa/<name>/`` folder: QA csv files and
  split indices), through ``huggingface_hub`` (``HF_ENDPOINT`` for a mirror), and touches no network
  when the files are already on disk. An unreachable hub ends in one line naming the missing files
  and the ways out (tests/test_stark_download.py runs it against a local stand-in for the hub).
* `read_graph` reads the processed files (without importing stark-qa) and returns a `KnowledgeGraph`
  whose node texts equal, character for character, stark-qa's
  ``SKB.get_doc_info(i, add_rel=False, compact=False)``. ``edges`` picks the edge semantics:
  ``"stored"`` (default) keeps every edge of ``edge_index.pt`` with its direction and type;
  ``"stark"`` is what stark-qa's ``SKB.__init__`` does (`stark_undirected`): unless the stored
  pairs are already symmetric (PRIME, the demo), ``to_undirected(reduce='mean')`` merges all edges
  between two nodes, *whatever their directions*, into one pair stored both ways whose type is the
  floored mean of their type ids (AMAZON: also_buy (0) and also_view (1) on one pair become
  also_buy only; MAG: a pair that cites each other becomes one cites edge each way), and a node's
  neighbors are then read from its own stored edges only, as stark-qa reads its row of the adjacency
  (`KnowledgeGraph.outgoing_only`): where a symmetric graph stores ``a -r1-> b`` and ``b -r0-> a``,
  ``b`` is an ``r1`` neighbor of ``a`` and not an ``r0`` one. Either way our neighbor sets equal
  ``SKB.get_neighbor_nodes(i)``; per relation, only ``"stark"`` equals ``SKB.get_neighbor_nodes(i, r)``.
* `read_queries` reads a QA set into a `QuerySet` (queries, gold answers, splits).

Run (``--root`` is the data root; these files go under ``<root>/stark``)::

    ark download prime --root data               # or mag, amazon, all
    ark download prime --root data --check       # are the files there? (offline)
"""

from __future__ import annotations

import ast
import logging
import os
import pickle
import shutil
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ark import atomic
from ark.data.graph import KnowledgeGraph
from ark.home import ark_home

REPO_ID = "snap-stanford/stark"
STARK_GRAPHS = ("prime", "mag", "amazon")
NAMES = tuple(sorted(STARK_GRAPHS)) + ("demo",)  # the paper's column order; "demo" uses PRIME's layout (ark.data.demo)
SPLITS = ("train", "val", "test", "test-0.1")
HUMAN_SPLIT = "human_generated_eval"
DEFAULT_ROOT = None   # the STaRK root default: <ARK_HOME>/stark (`stark_root`)
EDGES = ("stored", "stark")  # read_graph's edge semantics: as stored, or stark-qa's SKB (see the docstring)
# Revision of an edges="stark" graph, part of its cache key: 2 decides "already undirected" on multisets
# of pairs as torch-geometric's is_undirected does (1 compared sets, and kept some graphs stark-qa merges);
# 3 reads a node's neighbors from its own stored edges only (its cached both_ways_relations changed).
STARK_EDGES_REVISION = 3

AMAZON_META_LINKS = "brand-category-color"  # stark-qa's default meta_link_types, joined by "-"
AMAZON_MAX_ENTRIES = 25  # stark-qa's AmazonSKB max_entries: it prints entries 0..max_entries+1 (27)

# MAG's vocabularies are class attributes of stark-qa's MagSKB, not files.
MAG_NODE_TYPES = ["author", "institution", "field_of_study", "paper"]
MAG_RELATIONS = [
    "author___affiliated_with___institution",
    "paper___cites___paper",
    "paper___has_topic___field_of_study",
    "author___writes___paper",
]
# Explanations stark-qa's PrimeSKB adds after some gene/protein detail keys.
PRIME_GENE_KEYS = {
    "name": "gene name",
    "type_of_gene": "gene types",
    "alias": "other gene names",
    "other_names": "extended other gene names",
    "genomic_pos": "genomic position",
    "generif": "PubMed text",
    "interpro": "protein family and classification information",
    "summary": "protein summary text",
}
_GRAPH_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
_DICT_FILES = ("edge_type_dict.pkl", "node_type_dict.pkl")


class StarkFileError(RuntimeError):
    """A STaRK file on disk is truncated, corrupted or inconsistent with the others."""


def stark_root(root: Path | str | None = None) -> Path:
    """The STaRK root (the hub layout: ``skb/``, ``qa/``): ``root``, else ``<ARK_HOME>/stark``."""
    return Path(root) if root is not None else ark_home() / "stark"


def check_name(name: str) -> str:
    if name not in NAMES:
        raise ValueError(f"unknown graph {name!r}; valid graphs: {', '.join(NAMES)}")
    return name


def fetch_command(name: str, root: Path | str | None = DEFAULT_ROOT, check: bool = False) -> str:
    """The shell command that puts the files of graph ``name`` under ``root`` (the STaRK root, whose
    parent is the data root the ``ark`` command takes), or with ``check`` lists those missing."""
    if name == "demo":
        return f"ark build --graph demo --root {stark_root(root).parent}"
    return f"ark download {name} --root {stark_root(root).parent}" + (" --check" if check else "")


# ====================================================================== layout
def skb_dir(name: str, root: Path | str | None = DEFAULT_ROOT) -> Path:
    return stark_root(root) / "skb" / check_name(name)


def graph_dir(name: str, root: Path | str | None = DEFAULT_ROOT) -> Path:
    """The folder holding the processed graph files stark-qa loads for ``name``."""
    base = skb_dir(name, root) / "processed"
    return base / "cache" / AMAZON_META_LINKS if name == "amazon" else base


def graph_files(name: str, root: Path | str | None = DEFAULT_ROOT) -> list[Path]:
    """The processed files `read_graph` needs (MAG keeps its vocabularies in code, not in files)."""
    names = _GRAPH_FILES if name == "mag" else _GRAPH_FILES + _DICT_FILES
    return [graph_dir(name, root) / f for f in names]


def qa_dir(name: str, root: Path | str | None = DEFAULT_ROOT) -> Path:
    return stark_root(root) / "qa" / check_name(name)


def qa_files(name: str, root: Path | str | None = DEFAULT_ROOT) -> dict[str, Path]:
    """QA files by role: ``queries``, ``human_generated_eval`` and one per split."""
    qa = qa_dir(name, root)
    files = {
        "queries": qa / "stark_qa" / "stark_qa.csv",
        HUMAN_SPLIT: qa / "stark_qa" / "stark_qa_human_generated_eval.csv",
    }
    files.update({s: qa / "split" / f"{s}.index" for s in SPLITS})
    return files


def hub_files(name: str) -> list[str]:
    """What stark-qa 1.1.0 asks the hub for, for graph ``name``, in its order (folders end with '/';
    stark-qa fetches every file under them): ``processed.zip`` (``<Name>SKB``), MAG's ``schema/``,
    AMAZON's ``category_list.json`` and the whole ``qa/<name>/`` folder (``STaRKDataset``)."""
    if name not in STARK_GRAPHS:
        raise ValueError(f"no hub files for {name!r}; downloadable graphs: {', '.join(STARK_GRAPHS)}")
    if name == "amazon":   # AmazonSKB fetches category_list.json before processed.zip
        files = ["skb/amazon/category_list.json", "skb/amazon/processed.zip"]
    else:
        files = [f"skb/{name}/processed.zip"] + (["skb/mag/schema/"] if name == "mag" else [])
    return files + [f"qa/{name}/"]


def needed_files(name: str, root: Path | str | None = DEFAULT_ROOT) -> dict[str, list[Path]]:
    """Per hub entry of `hub_files`, the files on disk under ``root`` that show it is there."""
    root = stark_root(root)
    needed: dict[str, list[Path]] = {}
    for hub in hub_files(name):
        if hub.endswith("processed.zip"):
            needed[hub] = graph_files(name, root)
        elif hub == f"qa/{name}/":
            needed[hub] = list(qa_files(name, root).values())
        else:   # a file, or a folder (MAG's schema/) that must not be empty
            needed[hub] = [root / hub]
    return needed


def _present(path: Path) -> bool:
    return any(path.iterdir()) if path.is_dir() else path.exists()


def missing_files(name: str, root: Path | str | None = DEFAULT_ROOT) -> list[str]:
    """Hub entries of graph ``name`` not yet (completely) on disk under ``root`` (no network)."""
    return [hub for hub, paths in needed_files(name, root).items() if not all(_present(p) for p in paths)]


def missing_paths(name: str, root: Path | str | None = DEFAULT_ROOT) -> list[str]:
    """The files (relative to ``root``) that graph ``name`` still lacks on disk."""
    root = stark_root(root)
    return [str(p.relative_to(root)) + ("/" if hub.endswith("/") and p == root / hub else "")
            for hub, paths in needed_files(name, root).items() for p in paths if not _present(p)]


class StarkDownloadError(RuntimeError):
    """The hub could not be reached (or refused) while files were still missing; the message is one line."""


# ====================================================================== download
def download(name: str, root: Path | str | None = DEFAULT_ROOT, progress: bool = True) -> Path:
    """Fetch what stark-qa fetches for graph ``name`` into ``root`` (hub layout); return ``root``.

    Only entries with files missing on disk are fetched; when nothing is missing no network call is
    made. ``processed.zip`` is unzipped to ``skb/<name>/processed/`` and then deleted. The hub is
    ``huggingface_hub``'s endpoint (``HF_ENDPOINT`` for a mirror). When it cannot be reached,
    `StarkDownloadError` says so in one line, with the files still missing and the ways out.
    """
    check_name(name)
    if name == "demo":
        raise ValueError(f"the demo graph is built locally, not downloaded: {fetch_command(name, root)}")
    root = stark_root(root)
    todo = missing_files(name, root)
    if not todo:
        return root
    try:
        import huggingface_hub
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    except ImportError:  # pragma: no cover - huggingface_hub is in requirements.txt
        raise ImportError("downloading STaRK needs huggingface_hub: pip install huggingface_hub") from None

    bars_were_off = are_progress_bars_disabled()
    if not progress:
        disable_progress_bars()
    # the hub client logs a warning per retry of a failed request (5, over about 25 s); the outcome is
    # reported once, below, instead
    from huggingface_hub.utils import logging as hub_logging   # importing it sets the hub's own level

    hub_level = hub_logging.get_verbosity()
    hub_logging.set_verbosity(logging.ERROR)
    try:
        for i, hub in enumerate(todo, 1):
            if progress:
                print(f"[{i}/{len(todo)}] fetching {REPO_ID}:{hub} -> {root / hub}", file=sys.stderr)
            try:
                if hub.endswith("/"):
                    huggingface_hub.snapshot_download(REPO_ID, repo_type="dataset", allow_patterns=[hub + "*"],
                                                      local_dir=root)
                    continue
                path = Path(huggingface_hub.hf_hub_download(REPO_ID, hub, repo_type="dataset", local_dir=root))
            except Exception as e:
                reason = _hub_failure(e)
                if reason is None:
                    raise
                raise StarkDownloadError(_unreachable_message(name, root, reason)) from None
            if hub.endswith("processed.zip"):
                _unzip_processed(path, skb_dir(name, root), name, root)
    finally:
        hub_logging.set_verbosity(hub_level)
        if not progress and not bars_were_off:
            enable_progress_bars()
    still = missing_files(name, root)
    if still:
        raise StarkFileError(f"after downloading {name}, still missing under {root}: {', '.join(missing_paths(name, root))}")
    return root


def _hub_failure(e: Exception) -> str | None:
    """Why the hub gave nothing, when ``e`` says it could not be reached or refused; None for other errors."""
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    endpoint = constants.ENDPOINT
    if isinstance(e, OfflineModeIsEnabled) or (isinstance(e, LocalEntryNotFoundError) and constants.HF_HUB_OFFLINE):
        return f"the hub client is offline (HF_HUB_OFFLINE={constants.HF_HUB_OFFLINE and 1})"
    if isinstance(e, HfHubHTTPError) and getattr(e, "response", None) is not None:
        return f"the hub at {endpoint} answered HTTP {e.response.status_code}"
    if isinstance(e, (LocalEntryNotFoundError, ConnectionError, TimeoutError)) or \
            type(e).__module__.split(".")[0] in ("httpx", "httpcore", "requests", "urllib3"):
        return f"could not reach the hub at {endpoint}"
    return None


def _unreachable_message(name: str, root: Path, reason: str) -> str:
    missing = missing_paths(name, root)
    return (f"cannot download STaRK {name}: {reason}. Still missing under {root}: {', '.join(missing)}. "
            f"Ways out: point HF_ENDPOINT at a mirror of the hub (e.g. HF_ENDPOINT=https://hf-mirror.example "
            f"{fetch_command(name, root)}), or copy the files of {REPO_ID} there by hand in the hub's layout "
            f"(unzip skb/{name}/processed.zip into skb/{name}/, keep qa/{name}/ as it is) and check with "
            f"{fetch_command(name, root, check=True)}")


def _unzip_processed(zip_path: Path, target: Path, name: str, root: Path) -> None:
    """Unzip ``processed.zip`` so that its ``processed/`` folder lands at ``target/processed`` (each
    extracted folder swapped in whole)."""
    tmp = atomic.temp_path(target / ".unzip")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with zipfile.ZipFile(zip_path) as zf:
            zf.extractall(tmp)
    except (zipfile.BadZipFile, EOFError, OSError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        zip_path.unlink(missing_ok=True)
        raise StarkFileError(f"{zip_path} is truncated or corrupted ({e}); fetch it again: "
                             f"{fetch_command(name, root)}") from None
    entries = [p for p in tmp.iterdir() if p.name != "__MACOSX"]
    if not any(p.name == "processed" for p in entries):  # zip without a top folder: it is the folder
        (tmp / "processed").mkdir()
        for p in entries:
            p.rename(tmp / "processed" / p.name)
        entries = [tmp / "processed"]
    for p in entries:
        dest = target / p.name
        if p.is_dir():
            atomic.replace_dir(p, dest)   # a failed swap leaves files missing: checked after the download
        else:
            os.replace(p, dest)
    shutil.rmtree(tmp, ignore_errors=True)
    zip_path.unlink(missing_ok=True)


# ====================================================================== reading files
def _missing(path: Path, name: str, root: Path) -> FileNotFoundError:
    return FileNotFoundError(f"STaRK file missing: {path}; fetch it with: {fetch_command(name, root)}")


def _load_pickle(path: Path, name: str, root: Path):
    if not path.exists():
        raise _missing(path, name, root)
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (EOFError, pickle.UnpicklingError, ValueError, AttributeError, ImportError, IndexError) as e:
        raise StarkFileError(f"STaRK file truncated or corrupted: {path} ({type(e).__name__}: {e}); "
                             f"fetch it again with: {fetch_command(name, root)}") from None


def _load_tensor(path: Path, name: str, root: Path) -> np.ndarray:
    import torch

    if not path.exists():
        raise _missing(path, name, root)
    try:
        value = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError/EOFError/UnpicklingError/zip errors for bad files
        raise StarkFileError(f"STaRK file truncated or corrupted: {path} ({type(e).__name__}: {e}); "
                             f"fetch it again with: {fetch_command(name, root)}") from None
    if not isinstance(value, torch.Tensor):
        raise StarkFileError(f"{path} holds a {type(value).__name__}, expected a tensor")
    return value.numpy()


def _vocabulary(d: dict, path: Path) -> list[str]:
    if not isinstance(d, dict) or sorted(d) != list(range(len(d))):
        raise StarkFileError(f"{path}: expected a dict with keys 0..K-1, got keys {list(d)[:10]}")
    return [str(d[i]) for i in range(len(d))]


@dataclass
class ProcessedGraph:
    """STaRK's processed files of one graph, as read (``node_info`` untouched)."""

    name: str
    node_info: dict
    src: np.ndarray
    dst: np.ndarray
    rel: np.ndarray
    node_types: np.ndarray
    node_type_names: list[str]
    relation_names: list[str]


def read_processed(name: str, root: Path | str | None = DEFAULT_ROOT) -> ProcessedGraph:
    """Read and check the processed files of graph ``name`` (no network)."""
    check_name(name)
    root = stark_root(root)
    d = graph_dir(name, root)
    node_info = _load_pickle(d / "node_info.pkl", name, root)
    edge_index = _load_tensor(d / "edge_index.pt", name, root)
    edge_types = _load_tensor(d / "edge_types.pt", name, root).reshape(-1)
    node_types = _load_tensor(d / "node_types.pt", name, root).reshape(-1)
    if name == "mag":
        ntypes, rels = list(MAG_NODE_TYPES), list(MAG_RELATIONS)
    else:
        ntypes = _vocabulary(_load_pickle(d / "node_type_dict.pkl", name, root), d / "node_type_dict.pkl")
        rels = _vocabulary(_load_pickle(d / "edge_type_dict.pkl", name, root), d / "edge_type_dict.pkl")
    n = len(node_types)
    if not isinstance(node_info, dict):
        raise StarkFileError(f"{d / 'node_info.pkl'} holds a {type(node_info).__name__}, expected a dict")
    if len(node_info) != n:
        raise StarkFileError(f"{d / 'node_info.pkl'} has {len(node_info)} nodes but node_types.pt has {n}")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or edge_index.shape[1] != len(edge_types):
        raise StarkFileError(f"{d / 'edge_index.pt'} has shape {tuple(edge_index.shape)}; "
                             f"expected (2, {len(edge_types)}) to match edge_types.pt")
    return ProcessedGraph(name, node_info, edge_index[0].astype(np.int64), edge_index[1].astype(np.int64),
                          edge_types.astype(np.int64), node_types.astype(np.int64), ntypes, rels)


# ====================================================================== documents
def clean_info(d: dict) -> dict:
    """stark-qa's ``clean_dict``: drop values whose ``str`` is '' or 'nan' (so NaN too), recursing into
    dicts but not lists; None, ' ', [] and {} stay and print literally."""
    out = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out[key] = clean_info(value)
        elif str(value) not in ("", "nan"):
            out[key] = value
    return out


def prime_doc(info: dict) -> str:
    """PRIME (and demo) document of one node; ``info`` is its ``node_info`` entry after `clean_info`."""
    ntype = info["type"]
    lines = [f"- name: {info['name']}\n", f"- type: {ntype}\n", f"- source: {info['source']}\n"]
    details = []
    for key, value in (info.get("details") or {}).items():
        if str(value) in ("", "nan") or key.startswith("_") or "_id" in key:
            continue
        if ntype == "gene/protein" and key in PRIME_GENE_KEYS:
            if key == "interpro":
                value = [v["desc"] for v in ([value] if isinstance(value, dict) else value)]
            elif key == "generif":
                value = " ".join("; ".join(v["text"] for v in value).split(" ")[:50000])
            elif key == "genomic_pos" and isinstance(value, list):
                value = value[0]
            details.append(f"  - {key} ({PRIME_GENE_KEYS[key]}): {value}\n")
        else:
            details.append(f"  - {key}: {value}\n")
    if details:
        lines.append("- details:\n")
        lines += details
    return "".join(lines)


def _mag_counts(info: dict, label: str) -> str:
    doc = ""
    if info.get("PaperCount", -1) != -1:
        doc += f"- {label} paper count: {info['PaperCount']}\n"
    if info.get("CitationCount", -1) != -1:
        doc += f"- {label} citation count: {info['CitationCount']}\n"
    return doc


def mag_doc(info: dict) -> str:
    """MAG document of one node. Non-paper documents have every '-1' replaced by 'Unknown' (stark-qa
    does this on the whole text, so 'COVID-19' becomes 'COVIDUnknown9'); paper documents start with a
    space."""
    ntype = info.get("type")
    if ntype == "author":
        doc = f"- author name: {info.get('DisplayName')}\n" + _mag_counts(info, "author")
        return doc.replace("-1", "Unknown")
    if ntype == "field_of_study":
        doc = f" - field of study: {info.get('DisplayName')}\n" + _mag_counts(info, "field")
        return doc.replace("-1", "Unknown")
    if ntype == "institution":
        doc = f" - institution: {info.get('DisplayName')}\n" + _mag_counts(info, "institution")
        return doc.replace("-1", "Unknown")
    if ntype != "paper":
        raise StarkFileError(f"MAG node of unknown type {ntype!r}; valid types: {', '.join(MAG_NODE_TYPES)}")
    abstract = info.get("abstract", "")
    abstract = abstract if isinstance(abstract, str) else str(abstract)
    doc = f" - paper title: {info.get('title')}\n"
    doc += " - abstract: " + abstract.replace("\r", "").rstrip("\n") + "\n"
    if str(info.get("Date", -1)) != "-1":
        doc += f" - publication date: {info['Date']}\n"
    for key, label in (("OriginalVenue", "venue"), ("JournalDisplayName", "journal"),
                       ("ConferenceSeriesDisplayName", "conference"),
                       ("ConferenceInstancesDisplayName", "conference")):
        if str(info.get(key, -1)) != "-1":
            doc += f" - {label}: {info[key]}\n"
            break
    return doc


def _is_null(value) -> bool:
    import pandas as pd

    if value is None:
        return True
    return np.ndim(value) == 0 and bool(pd.isnull(value))


def _review_order(reviews: list) -> np.ndarray:
    """stark-qa's review order: descending votes via numpy's default (unstable) argsort on -votes."""
    votes = [0 if _is_null(r["vote"]) else int(str(r["vote"]).replace(",", "")) for r in reviews]
    return np.argsort(-np.array(votes))


def amazon_doc(info: dict, ntype: str, max_entries: int = AMAZON_MAX_ENTRIES) -> str:
    """AMAZON document of one node of type ``ntype`` (product, brand, category or color)."""
    if ntype in ("brand", "category", "color"):
        return f"{ntype} name: {info[ntype + '_name']}"
    doc = f"- product: {info.get('title')}\n"
    if "brand" in info:
        doc += f"- brand: {info['brand']}\n"
    details = info.get("details")
    dims = details.get("product_dimensions") if isinstance(details, dict) else None
    if isinstance(dims, str) and len(dims.split(" ; ")) == 2:
        dimensions, weight = dims.split(" ; ")
        doc += f"- dimensions: {dimensions}\n- weight: {weight}\n"
    description = info.get("description")
    if description:
        text = (" ".join(description) if not isinstance(description, float) else str(description)).strip(" ")
        if text:
            doc += f"- description: {text}\n"
    features = info.get("feature")
    if features:
        doc += "- features: \n"
        for i, feat in enumerate(features):
            if feat and "asin" not in feat.lower():
                doc += f"#{i + 1}: {feat}\n"
    reviews = info.get("review")
    if reviews:
        doc += "- reviews: \n"
        for i, r in enumerate(_review_order(reviews)):
            review = reviews[r]
            doc += f'#{r + 1}:\nsummary: {review["summary"]}\ntext: "{review["reviewText"]}"\n'
            if i > max_entries:
                break
    qas = info.get("qa")
    if qas:
        doc += "- Q&A: \n"
        for i, qa in enumerate(qas):
            doc += f'#{i + 1}:\nquestion: "{qa["question"]}"\nanswer: "{qa["answer"]}"\n'
            if i > max_entries:
                break
    return doc


def _node_name(name: str, info: dict, ntype: str) -> str:
    if name in ("prime", "demo"):
        return str(info.get("name", ""))
    if name == "mag":
        return str(info.get("title") if ntype == "paper" else info.get("DisplayName"))
    if ntype == "product":
        return str(info.get("title", ""))
    return str(info.get(ntype + "_name", ""))


def documents(g: ProcessedGraph) -> Iterator[tuple[str, str]]:
    """(name, document) of every node in id order, documents as stark-qa's ``get_doc_info``."""
    for i in range(len(g.node_types)):
        try:
            info = g.node_info[i]
        except KeyError:
            raise StarkFileError(f"node_info.pkl of {g.name} has no entry for node {i}") from None
        ntype = g.node_type_names[g.node_types[i]]
        try:
            if g.name in ("prime", "demo"):
                info = clean_info(info)
                doc = prime_doc(info)
            elif g.name == "mag":
                doc = mag_doc(info)
            else:
                doc = amazon_doc(info, ntype)
        except (KeyError, TypeError, AttributeError) as e:
            raise StarkFileError(f"node {i} of {g.name} ({ntype}) has malformed node_info: "
                                 f"{type(e).__name__}: {e}") from None
        yield _node_name(g.name, info, ntype), doc


def candidate_ids(g: ProcessedGraph) -> np.ndarray:
    """STaRK's candidates: AMAZON product nodes, MAG paper nodes, every node of PRIME (and demo)."""
    wanted = {"amazon": "product", "mag": "paper"}.get(g.name)
    if wanted is None:
        return np.arange(len(g.node_types), dtype=np.int64)
    return np.flatnonzero(g.node_types == g.node_type_names.index(wanted)).astype(np.int64)


def check_edges(edges: str) -> str:
    if edges not in EDGES:
        raise ValueError(f"unknown edges {edges!r}; valid: {', '.join(EDGES)}")
    return edges


def stark_undirected(src: np.ndarray, dst: np.ndarray, rel: np.ndarray, num_nodes: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """stark-qa's ``SKB.__init__`` edge handling: when the stored (src, dst) pairs are not already
    symmetric (torch_geometric's ``is_undirected``), ``to_undirected(edge_index, edge_types,
    reduce='mean')`` then ``.long()``: every ordered pair (a, b) linked by stored edges in either
    direction becomes one edge a -> b, and one b -> a, whose type is the floored mean of the type ids
    of all stored edges between a and b (each counted once per direction it is listed in, i.e. twice).
    Symmetric input comes back unchanged, duplicates included.

    "Symmetric" is ``is_undirected``'s test: the rows sorted by (src, dst) equal the rows sorted by
    (dst, src) with the two columns swapped, i.e. the *multiset* of pairs equals that of the reversed
    pairs. Every pair stored both ways is not enough: (a, b) listed twice and (b, a) once is merged."""
    src, dst, rel = (np.asarray(a, dtype=np.int64) for a in (src, dst, rel))
    n = max(int(num_nodes), 1)
    key, rkey = src * n + dst, dst * n + src
    if np.array_equal(np.sort(key), np.sort(rkey)):
        return src, dst, rel
    both = np.concatenate([key, rkey])
    pairs, inverse = np.unique(both, return_inverse=True)
    sums = np.bincount(inverse, weights=np.concatenate([rel, rel]).astype(np.float64), minlength=len(pairs))
    counts = np.bincount(inverse, minlength=len(pairs))
    merged = (sums.astype(np.int64) // counts).astype(np.int64)
    return pairs // n, pairs % n, merged


def read_graph(name: str, root: Path | str | None = DEFAULT_ROOT, edges: str = "stored") -> KnowledgeGraph:
    """Read STaRK graph ``name`` from ``root`` (hub layout) into a `KnowledgeGraph` (no network).

    A missing file raises FileNotFoundError naming it and the command that fetches it; a truncated
    one raises `StarkFileError`. ``edges``: ``"stored"`` keeps ``edge_index.pt`` as it is (directed,
    every edge); ``"stark"`` applies `stark_undirected`, as stark-qa's SKB does, and the graph reads a
    node's neighbors from its own stored edges (`KnowledgeGraph.outgoing_only`).
    """
    check_edges(edges)
    g = read_processed(name, root)
    names, texts = [], []
    for node_name, doc in documents(g):
        names.append(node_name)
        texts.append(doc)
    return graph_with_edges(name, g.node_type_names, g.node_types, names, texts, g.relation_names,
                            g.src, g.dst, g.rel, candidate_ids(g), edges)


def graph_with_edges(name: str, node_type_names, node_types, names, texts, relation_names, src, dst, rel,
                     candidate_ids=None, edges: str = "stored") -> KnowledgeGraph:
    """`KnowledgeGraph.from_edges` of stored edges under ``edges``' semantics (`read_graph`'s last step):
    ``"stark"`` merges them with `stark_undirected` and reads a node's neighbors from its own stored edges
    (`KnowledgeGraph.outgoing_only`), as stark-qa's ``SKB`` does with any graph it is given."""
    check_edges(edges)
    if edges == "stark":
        src, dst, rel = stark_undirected(src, dst, rel, len(node_types))
    graph = KnowledgeGraph.from_edges(name, node_type_names, node_types, names, texts, relation_names,
                                      src, dst, rel, candidate_ids=candidate_ids)
    graph.meta["edges"] = edges
    return graph


# ====================================================================== queries
@dataclass(frozen=True)
class Query:
    """One STaRK query: its id (the csv's ``id``), text and gold answer node ids."""

    id: int
    text: str
    answer_ids: tuple[int, ...]


@dataclass
class QuerySet:
    """A STaRK QA set: queries by id and the split lists.

    Split files hold query ids (not row positions); stark-qa maps each to its position in the sorted list
    of ids (`positions`). The ``human_generated_eval`` split comes from its own csv, whose ids may repeat
    ids of the main set, so ``qs[qid]`` looks up the main set only.
    """

    name: str
    queries: dict[int, Query]
    splits: dict[str, list[int]] = field(default_factory=dict)
    human: list[Query] = field(default_factory=list)

    def __post_init__(self):
        self._sorted_ids = sorted(self.queries)
        self._position = {qid: i for i, qid in enumerate(self._sorted_ids)}

    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[Query]:
        return (self.queries[q] for q in self._sorted_ids)

    def __getitem__(self, qid: int) -> Query:
        if qid in self.queries:  # string ids (tables graphs) are looked up as they are
            return self.queries[qid]
        try:
            return self.queries[int(qid)]
        except (KeyError, ValueError, TypeError):
            raise KeyError(f"no query with id {qid!r} in {self.name} "
                           f"(ids {self._sorted_ids[0]}..{self._sorted_ids[-1]})") from None

    def split_names(self) -> list[str]:
        return list(self.splits) + ([HUMAN_SPLIT] if self.human else [])

    def split(self, name: str) -> list[Query]:
        """The queries of split ``name`` in the order of its index file."""
        if name == HUMAN_SPLIT and self.human:
            return list(self.human)
        if name not in self.splits:
            raise ValueError(f"unknown split {name!r} for {self.name}; valid splits: {', '.join(self.split_names())}")
        return [self.queries[q] for q in self.splits[name]]

    def ids(self) -> list[int]:
        """All query ids, sorted (stark-qa's ``STaRKDataset.indices``)."""
        return list(self._sorted_ids)

    def positions(self, name: str) -> np.ndarray:
        """stark-qa's ``get_idx_split()[name]``: positions of the split's queries in `ids`."""
        if name == HUMAN_SPLIT and self.human:
            return np.arange(len(self.human), dtype=np.int64)
        self.split(name)  # validates the name
        return np.array([self._position[q] for q in self.splits[name]], dtype=np.int64)


def _read_csv(path: Path, name: str, root: Path) -> list[Query]:
    import pandas as pd

    if not path.exists():
        raise _missing(path, name, root)
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise StarkFileError(f"STaRK file unreadable: {path} ({e}); fetch it again with: "
                             f"{fetch_command(name, root)}") from None
    for col in ("id", "query", "answer_ids"):
        if col not in df.columns:
            raise StarkFileError(f"{path} has no column {col!r}; columns: {', '.join(map(str, df.columns))}")
    out = []
    for row_id, text, answers in zip(df["id"], df["query"], df["answer_ids"]):
        try:
            ids = ast.literal_eval(answers) if isinstance(answers, str) else answers
            ids = tuple(int(a) for a in ids)
        except (ValueError, SyntaxError, TypeError):
            raise StarkFileError(f"{path}: query {row_id} has unreadable answer_ids {answers!r}; "
                                 f"fetch it again with: {fetch_command(name, root)}") from None
        out.append(Query(int(row_id), str(text), ids))
    return out


def _read_index(path: Path, name: str, root: Path) -> list[int]:
    if not path.exists():
        raise _missing(path, name, root)
    text = path.read_text().strip()
    try:
        return [int(x) for x in text.split("\n")] if text else []
    except ValueError as e:
        raise StarkFileError(f"{path} is corrupted ({e}); fetch it again with: {fetch_command(name, root)}") from None


def read_queries(name: str, root: Path | str | None = DEFAULT_ROOT) -> QuerySet:
    """Read the QA set of graph ``name`` (no network).

    STaRK graphs need every file `download` fetches; the demo needs ``stark_qa.csv`` and the
    train/val/test indices (``test-0.1``, its other ``split/*.index`` files such as ``test-mismatch``
    and the human-generated csv are read when present).
    """
    check_name(name)
    root = stark_root(root)
    files = qa_files(name, root)
    queries = {}
    for q in _read_csv(files["queries"], name, root):
        if q.id in queries:
            raise StarkFileError(f"{files['queries']}: query id {q.id} appears twice")
        queries[q.id] = q
    optional = {"test-0.1", HUMAN_SPLIT} if name == "demo" else set()
    splits = {}
    for s in SPLITS:
        if s in optional and not files[s].exists():
            continue
        ids = _read_index(files[s], name, root)
        unknown = [q for q in ids if q not in queries]
        if unknown:
            raise StarkFileError(f"{files[s]} lists query ids not in {files['queries'].name}: {unknown[:10]}")
        splits[s] = ids
    if name == "demo":  # the demo's splits of its own (ark.data.demo.MISMATCH_SPLIT), after STaRK's
        for f in sorted(files["test"].parent.glob("*.index")):
            if f.stem not in splits:
                ids = _read_index(f, name, root)
                unknown = [q for q in ids if q not in queries]
                if unknown:
                    raise StarkFileError(f"{f} lists query ids not in {files['queries'].name}: {unknown[:10]}")
                splits[f.stem] = ids
    human = []
    if not (HUMAN_SPLIT in optional and not files[HUMAN_SPLIT].exists()):
        human = sorted(_read_csv(files[HUMAN_SPLIT], name, root), key=lambda q: q.id)
    return QuerySet(name, queries, splits, human)
