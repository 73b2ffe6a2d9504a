"""What the graph tools run against: `ToolSet` (one graph, its BM25 index and global search, a
`ToolConfig`, the id space its tools show and read: `ark.tools.ids`) and the `ToolResult` every tool
returns; the argument coercion the tools share (`ark.tools.arguments`) is re-exported here.

The tools themselves live one per module beside this one (``search_graph.py``, ``explore_neighbors.py``;
the answer tools ``select.py``, ``finish.py``), each declared once as an `ark.tools.registry.Tool`.
`ToolSet.openai_tools` builds the OpenAI ``tools`` list of every enabled graph tool of the registry, and
`ToolSet.call` runs one by its handler ``handler(toolset, args)``. The ablation switches of `ToolConfig`
(``neighbors``, ``neighbor_query``, ``type_filter``, ``search_type_filter``, ``neighbor_paging``;
``switches`` for tools added later) remove a tool or its parameters from the schema, and `ToolSet.call`
then rejects them like any other unknown argument.

`ToolSet.call` never raises on what an LLM may send. What cannot run gets a short error observation
(`ToolResult.error` set): malformed JSON, wrong or missing argument names, ids out of range, unknown
type names (answered with the valid ones), a search query that is empty or only stopwords. What can be
fixed up runs: ids as strings ("12" works; the graph's own ids where the tools show those); k out of range is clamped, and a neighbor query of only
stopwords lists the neighbors in id order, each with a note in the observation. Empty lists for
``node_types``/``relations`` mean "no filter"; type names are matched exactly, then ignoring case and
surrounding spaces. A handler raises `ToolInputError` for what the LLM must fix; its message becomes
the observation.

    tools = ToolSet(graph, index, ToolConfig())
    tools.call("search_graph", {"query": "KCNH2 long QT"}).observation
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numba import njit

from ark.observation import NodeLine, Snippeter
from ark.search.bm25 import BM25Index, _heap_push
from ark.search.modes import GlobalSearch
from ark.tools import registry as tool_registry
from ark.tools.arguments import (ToolInputError, _as_int, _as_offset, _as_query, _clamp_k, loads_arguments,  # noqa: F401
                                 _resolve_names, _show)
from ark.tools.ids import NodeIds
from ark.tools.registry import Tool


@dataclass
class ToolConfig:
    """Tool budgets and the toolset ablations of the paper's Table 2."""

    search_k: int = 5  # default k of search_graph (paper: 5)
    search_k_max: int = 50  # largest k the agent may ask search_graph for
    neighbors_k: int = 20  # default k of explore_neighbors (paper: 20)
    neighbors_k_max: int = 100  # largest k the agent may ask explore_neighbors for
    neighbors: bool = True  # False: "w/o Neighbors" (explore_neighbors is not offered)
    neighbor_query: bool = True  # False: "Neighbors w/o q" (no query parameter, id order)
    type_filter: bool = True  # False: "Neighbors w/o F" (no node_types/relations parameters)
    search_type_filter: bool = True  # offer the node_types parameter of search_graph
    neighbor_paging: bool = False  # True: explore_neighbors takes an offset and its footer says how to page
    max_observation_tokens: int = 2000  # observation budget, approx. tokens (ark.observation)
    snippet_chars: int = 160  # length of the text snippet per node
    switches: dict[str, bool] = field(default_factory=dict)  # switches of tools added to the registry later
    # the ids observations show and arguments take (ark.tools.ids): None, the graph's own where it has them
    # (tables, RDF); False, the internal 0..N-1 (STaRK's and the demo's ids either way)
    user_ids: bool | None = None

    def __post_init__(self):
        for name in ("search_k", "search_k_max", "neighbors_k", "neighbors_k_max", "max_observation_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"ToolConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.search_k > self.search_k_max or self.neighbors_k > self.neighbors_k_max:
            raise ValueError("ToolConfig: a default k is above its maximum")
        self.switches = dict(self.switches or {})
        # a misspelt switch fails when the config is built, before a run starts
        valid = tool_registry.switch_names() if self.switches else []
        bad = [k for k in self.switches if k not in valid]
        if bad:
            raise ValueError(f"unknown tool switch {', '.join(map(repr, bad))} in ToolConfig.switches; "
                             f"valid switches: {', '.join(valid)}")
        if self.user_ids not in (None, True, False):
            raise ValueError(f"ToolConfig.user_ids must be true, false or null (the graph's own ids where it has "
                             f"them), got {self.user_ids!r}")

    def switch(self, name: str) -> bool:
        """The value of an ablation switch: a key of ``switches``, else a boolean field (``neighbors``...),
        else the default of the tool it switches (`ark.tools.registry.switch_default`: on, unless the
        tool is opt-in)."""
        if name in self.switches:
            return bool(self.switches[name])
        value = getattr(self, name, None)
        if isinstance(value, bool):
            return value
        return tool_registry.switch_default(name)


@dataclass
class ToolResult:
    """What one tool call returns: the observation text for the LLM, the node ids shown in it, and the
    error message when the call was rejected (then ``node_ids`` is empty)."""

    observation: str
    node_ids: list[int]
    error: str | None = None




@njit(cache=True, nogil=True)
def _top_k_kernel(scores, k):
    """One pass over ``scores``: a heap of the best ``k`` (score, position) pairs (unsorted), its size,
    and the number of scores > 0."""
    hs = np.empty(k, dtype=np.float32)
    hi = np.empty(k, dtype=np.int64)
    size = 0
    matched = 0
    for p in range(len(scores)):
        s = scores[p]
        if s > 0:
            matched += 1
        if size < k or s > hs[0]:  # ascending positions: an equal score never beats a kept one
            size = _heap_push(hs, hi, size, s, p)
    return hs[:size], hi[:size], matched


def _top_k_matched(scores: np.ndarray, k: int) -> tuple[np.ndarray, int]:
    """Positions of the ``k`` highest scores (descending, ties by lower position; O(n log k)) and the
    number of scores > 0."""
    if k < 1:
        return np.empty(0, dtype=np.int64), int((scores > 0).sum())
    hs, hi, matched = _top_k_kernel(np.asarray(scores, dtype=np.float32), int(k))
    return hi[np.lexsort((hi, -hs))], int(matched)


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest scores, descending, ties by lower position."""
    return _top_k_matched(scores, k)[0]

# ------------------------------------------------------------------------------ the tool set
class ToolSet:
    """The tools over one graph and its BM25 index, as configured."""

    def __init__(self, graph, index: BM25Index, config: ToolConfig | None = None, search: GlobalSearch | None = None,
                 result_cache: int = 4096):
        """``search``: how search_graph and the neighbor ranking score text (`ark.search.modes`); default
        lexical BM25 over ``index``, the paper's. ``result_cache``: how many distinct calls' results `call`
        keeps for a repeat of the same call (0: none)."""
        if result_cache < 0:
            raise ValueError(f"result_cache must be >= 0, got {result_cache}")
        self.graph = graph
        self._results: OrderedDict[tuple[str, str], ToolResult] = OrderedDict()
        self._results_max = result_cache
        self._results_lock = threading.Lock()
        self.index = index
        self.config = config or ToolConfig()
        if index.num_docs != graph.num_nodes:
            raise ValueError(f"index has {index.num_docs} documents but the graph has {graph.num_nodes} nodes")
        self.search = search if search is not None else GlobalSearch(index)
        if self.search.bm25 is not index:
            raise ValueError("the GlobalSearch must use the tool set's BM25 index")
        self.snippet = Snippeter(index.tokenizer, self.config.snippet_chars)
        self.ids = NodeIds.for_graph(graph, self.config.user_ids)  # the ids observations show, arguments take
        self._type_masks: dict[tuple[str, ...], np.ndarray] = {}
        self._cache: dict[str, Any] = {}
        self._check_switches()
        # each enabled registered graph tool, reduced to the parameters this config offers
        self.specs: dict[str, Tool] = {t.name: replace(t, params=t.offered_params(self.config))
                                       for t in tool_registry.all_tools("graph") if t.enabled(self.config)}

    def _check_switches(self) -> None:
        valid = tool_registry.switch_names()
        bad = [k for k in self.config.switches if k not in valid]
        if bad:
            raise ValueError(f"unknown tool switch {', '.join(map(repr, bad))} in ToolConfig.switches; "
                             f"valid switches: {', '.join(valid)}")

    def warm_up(self) -> threading.Thread:
        """Start loading the tools' numba kernels in a daemon thread (`BM25Index.warm_up`, the top-k
        kernel) and return it. A sweep job starts it once its tools are built: the ~0.5 s of numba's
        first-call set-up then overlaps the agent's first LLM round trip instead of delaying the first
        ``search_graph`` answer. A tool call made meanwhile waits for numba's compiler lock: it is never
        slower than without the warm-up, and its results are the same. Where the tools take the graph's
        own ids, the graph's id lookup is built too (about 2 s for 1.9M string ids, once per process)."""
        def run() -> None:
            self.index.warm_up()
            _top_k_kernel(np.zeros(1, dtype=np.float32), 1)
            if self.ids.user and self.graph.num_nodes:
                self.graph.node_index(self.graph.external_id(0))

        thread = threading.Thread(target=run, name="ark-tools-warm-up", daemon=True)
        thread.start()
        return thread

    # ------------------------------------------------------------------ schema
    def openai_tools(self) -> list[dict]:
        """The OpenAI ``tools`` list of the configured graph tools."""
        return [t.openai(self) for t in self.specs.values()]

    @property
    def tool_names(self) -> list[str]:
        return list(self.specs)

    # ------------------------------------------------------------------ dispatch
    def call(self, name: str, arguments: dict | str | None) -> ToolResult:
        """Run tool ``name``; bad arguments give an error observation, never an exception.

        A tool's result is a function of its arguments and the graph, so a call repeated with the same
        arguments (the n agents of a query mostly open with the same search) gets the first one's result,
        kept for the last ``result_cache`` distinct calls; the result is shared: read it, do not change it."""
        key = _call_key(name, arguments) if self._results_max else None
        if key is not None:
            with self._results_lock:
                hit = self._results.get(key)
                if hit is not None:
                    self._results.move_to_end(key)
                    return hit
        result = self._run(name, arguments)
        if key is not None:
            with self._results_lock:
                self._results[key] = result
                if len(self._results) > self._results_max:
                    self._results.popitem(last=False)
        return result

    def _run(self, name: str, arguments: dict | str | None) -> ToolResult:
        try:
            spec = self.specs.get(name) if isinstance(name, str) else None
            if spec is None:
                raise ToolInputError(f"there is no tool named {_show(name)}; call one of: {', '.join(self.specs)}")
            return spec.handler(self, self._parse(spec, arguments))
        except ToolInputError as e:
            return error_result(e)

    @staticmethod
    def _parse(spec: Tool, arguments) -> dict:
        if arguments is None:
            arguments = {}
        if isinstance(arguments, (bytes, bytearray)):
            arguments = arguments.decode("utf-8", errors="replace")
        if isinstance(arguments, str):
            text = arguments.strip()
            try:
                arguments = loads_arguments(text) if text else {}
            except json.JSONDecodeError as e:
                raise ToolInputError(f"the arguments of {spec.name} are not valid JSON ({e.msg} at character "
                                     f"{e.pos}); send one JSON object with the keys "
                                     f"{', '.join(p.name for p in spec.params)}. You sent {_show(text)}") from None
        valid = [p.name for p in spec.params]
        if not isinstance(arguments, dict):
            raise ToolInputError(f"the arguments of {spec.name} must be one JSON object with the keys "
                                 f"{', '.join(valid)}, not {_show(arguments)}")
        unknown = [k for k in arguments if k not in valid]
        if unknown:
            raise ToolInputError(f"{spec.name} has no argument {', '.join(map(_show, unknown))}; "
                                 f"its arguments are: {', '.join(valid)}")
        missing = [p.name for p in spec.params if p.required and arguments.get(p.name) is None]
        if missing:
            raise ToolInputError(f"{spec.name} needs the argument {', '.join(missing)}; "
                                 f"its arguments are: {', '.join(valid)}")
        return arguments

    # ------------------------------------------------------------------ for the handlers
    def as_node_id(self, value, name: str = "node_id") -> int:
        """An id argument (``node_id``, or ``name``) as the internal id of a node of this graph, read in the
        tool set's id space (`ark.tools.ids.NodeIds`; ToolInputError otherwise)."""
        return self.ids.parse(name, value)

    def type_mask(self, types: list[str]) -> np.ndarray:
        """Per node: is it of one of ``types`` (cached per set of types)."""
        key = tuple(sorted(types))
        mask = self._type_masks.get(key)
        if mask is None:
            ok = np.zeros(len(self.graph.node_type_names), dtype=bool)
            ok[[self.graph.node_type_id(t) for t in types]] = True
            mask = self._type_masks[key] = ok[np.asarray(self.graph.node_types)]
        return mask

    def node_line(self, i: int, score: float | None, terms: Sequence[str], links=()) -> NodeLine:
        """Node ``i`` as one observation line, its snippet around the matched query ``terms``."""
        g = self.graph
        name, type_name = g.node_name(i), g.node_type_name(i)
        return NodeLine(i, name, type_name, self.snippet(g.node_text(i), terms, drop=(name, type_name)),
                        score, list(links), self.ids.show(i))

    def searchable(self, query: str) -> bool:
        """Does ``query`` keep a word after tokenizing (stopwords removed)?"""
        return bool(self.index.tokenizer(query))

    def cached(self, key: str, make: Callable[[], Any]) -> Any:
        """A value derived from the graph once per tool set (``make()`` on the first call with ``key``),
        e.g. a per-relation mask a tool reads on every call."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def _call_key(name, arguments) -> tuple[str, str] | None:
    """A tool call as a key of `ToolSet.call`'s results: its name and its arguments as sorted JSON (a
    JSON text as sent); None for what cannot be a key (a non-string name, arguments JSON cannot hold)."""
    if not isinstance(name, str):
        return None
    if arguments is None or isinstance(arguments, (str, bytes, bytearray)):
        raw = arguments.decode("utf-8", errors="replace") if isinstance(arguments, (bytes, bytearray)) else arguments
        return name, "\x00" + (raw or "")   # a text as sent: never equal to a dict's JSON
    try:
        return name, json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def default_graph_tool_names() -> list[str]:
    """The graph tools a run offers when it sets no switch (the default `ToolConfig`): the columns every
    run's statistics have; an opt-in tool (``Tool.default_on=False``) gets a column in the runs that call it."""
    config = ToolConfig()
    return [t.name for t in tool_registry.all_tools("graph") if t.enabled(config)]


def error_result(e: ToolInputError) -> ToolResult:
    """The observation of a rejected call: ``Error: <the message>.``"""
    sentence = str(e).rstrip(".") + "."
    return ToolResult(f"Error: {sentence}", [], sentence)


def node_id_schema(ts: ToolSet | None) -> dict:
    """JSON schema of one node id argument in the tool set's id space (an integer without a tool set)."""
    return ts.ids.schema() if ts is not None else {"type": "integer"}


def node_types_schema(ts: ToolSet) -> dict:
    """JSON schema of a ``node_types`` parameter: a list of the graph's node type names."""
    return {"type": "array", "items": {"type": "string", "enum": list(ts.graph.node_type_names)}}
