"""Node ids as the tools show and read them: `NodeIds`, the id space of one tool set.

Inside, a graph's nodes are ``0..N-1`` (what predictions, trajectories' ``node_ids``, fusion and metrics
hold). The tools show and accept one of two id spaces:

* the **internal** ids, for STaRK and the demo, whose ids these are (the paper's observations);
* the graph's **own** ids (`ark.data.graph.KnowledgeGraph.external_id`: a tables graph's ``id`` column,
  an RDF graph's IRIs), so an agent, an MCP client or a person at the command line reads and types the
  ids of their own database, and an answer maps back to it without a lookup table.

`ark.tools.toolset.ToolConfig.user_ids` picks the space: ``None`` (the default) the graph's own ids where
it has them, ``False`` the internal ids; ``True`` is the default's meaning spelled out (a graph without
ids of its own shows its internal ids either way). Every id in an observation (``[id]`` of a node line,
the explored node in a header) is written by `NodeIds.show`; every id argument (``explore_neighbors``'
``node_id``, ``select``'s ``node_ids``, any parameter with ``Param.shown_ids``) is read by
`NodeIds.parse`, and its JSON schema is `NodeIds.schema` (``integer``, or ``string`` for string ids).

    ids = NodeIds.for_graph(graph)              # the graph's own ids where it has them
    ids.show(3), ids.parse("node_id", "P4")     # ('P4', 3) on a graph whose node 3 has the id "P4"
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ark.tools.arguments import ToolInputError, _as_int, _show


class NodeIds:
    """How one tool set shows node ids and reads them back (internal ``0..N-1``, or the graph's own)."""

    def __init__(self, graph=None, user: bool = False):
        """``user``: show the graph's own ids (only where ``graph`` has them; otherwise the internal ids)."""
        self.graph = graph
        self.user = bool(user and graph is not None and graph.has_external_ids)
        int_ids = not self.user or graph.meta.get("external_id_type") == "int"
        self.json_type = "integer" if int_ids else "string"

    @classmethod
    def for_graph(cls, graph, user_ids: bool | None = None) -> "NodeIds":
        """The id space `ToolConfig.user_ids` asks for: the graph's own ids unless it is False."""
        if user_ids not in (None, True, False):
            raise ValueError(f"user_ids={user_ids!r}; choose true, false or null (the graph's own ids where it has them)")
        return cls(graph, user=user_ids is not False)

    @property
    def space(self) -> str:
        """The id space: "user" (the graph's own ids) or "internal"."""
        return "user" if self.user else "internal"

    # ------------------------------------------------------------------ showing
    def show(self, i: int) -> int | str:
        """The id of internal node ``i`` as observations show it and arguments take it."""
        return self.graph.external_id(int(i)) if self.user else int(i)

    def text(self, i: int) -> str:
        """`show` as text, as it stands in brackets: ``[P4]``, ``[3]``."""
        return str(self.show(i))

    def listing(self, ids: Iterable[int]) -> str:
        """A list of internal ids as an observation writes it: ``[6, 3]``, or ``["P4", "A2"]`` (JSON)."""
        shown = [self.show(i) for i in ids]
        return json.dumps(shown, ensure_ascii=False) if self.json_type == "string" else str(shown)

    def schema(self) -> dict:
        """The JSON schema of one id argument."""
        return {"type": self.json_type}

    # ------------------------------------------------------------------ reading
    def parse(self, name: str, value) -> int:
        """The internal id of the node that the argument ``name`` names (ToolInputError otherwise)."""
        if not self.user:
            v = _as_int(name, value)
            n = self.graph.num_nodes if self.graph is not None else None
            if n is not None and not 0 <= v < n:
                raise ToolInputError(f"{name} {v} does not exist; use an id shown in an earlier result "
                                     f"(ids run from 0 to {n - 1})")
            return v
        if self.json_type == "integer":
            key = _as_int(name, value)
        elif isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            key = str(value)
        else:
            raise ToolInputError(f"{name} must be a node id (a string, as shown in brackets), not {_show(value)}")
        for candidate in dict.fromkeys((key, key.strip() if isinstance(key, str) else key)):
            try:
                return self.graph.node_index(candidate)
            except KeyError:
                continue
        shown = key if self.json_type == "integer" else value   # as read: 8 for "8" where ids are integers
        raise ToolInputError(f"{name} {_show(shown)} is not the id of a node of this graph; use an id shown in "
                             "brackets in an earlier result")

    def find(self, value) -> int | None:
        """The internal id ``value`` names, or None when it names none. Internal ids are only read as
        integers, not checked against the graph (an id out of range is one never shown)."""
        try:
            if not self.user:
                return _as_int("node_id", value)
            return self.parse("node_id", value)
        except ToolInputError:
            return None

    def describe(self) -> dict:
        """What a client needs to know of the ids: their space, JSON type and a few examples."""
        n = self.graph.num_nodes if self.graph is not None else 0
        out = {"space": self.space, "json_type": self.json_type, "examples": [self.show(i) for i in range(min(3, n))]}
        if self.user:
            out["about"] = ("the graph's own node ids (a tables graph's id column, an RDF graph's IRIs), shown in "
                            "brackets and taken by every id argument")
        else:
            out["about"] = f"node ids 0..{n - 1}, shown in brackets and taken by every id argument"
        return out
