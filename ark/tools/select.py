"""The ``select`` tool: its schema, its texts and its handler, which appends ids to the agent's answer.

``select(node_ids)`` appends, in order, the ids that a graph tool showed in this trajectory and that are
not chosen yet to the answer list R (`ark.tools.answer.AnswerState`); it reports the ids it skipped
(already selected) and rejects those never shown or not ids. Lenient on form (an ``ids`` key, a bare
id, ids as digit strings), strict on content. Ids are read and written in the graph tools' id space
(`AnswerState.ids`, `ark.tools.ids`: the graph's own ids where the tools show those); R holds internal ids.

    state = AnswerState(seen={3, 6}, shown_by=("search_graph",))
    select(state, {"node_ids": [6, 99]}).observation
"""

from __future__ import annotations

from ark.tools.answer import AnswerState
from ark.tools.ids import NodeIds
from ark.tools.registry import Param, Tool
from ark.tools.toolset import ToolResult, _show, node_id_schema

NAME = "select"


def _as_node_ids(value: object, ids: NodeIds | None = None) -> tuple[list[int], list[object]]:
    """The `node_ids` argument as internal ids (read in the id space ``ids``, default internal);
    returns (ids, values that name no node)."""
    ids = ids if ids is not None else NodeIds()
    items = value if isinstance(value, list) else [value]
    found, bad = [], []
    for item in items:
        i = ids.find(item)
        if i is None:
            bad.append(item)
        else:
            found.append(i)
    return found, bad


def select(answer: AnswerState, args: dict) -> ToolResult:
    """The handler: append the seen, not yet chosen ids in order; report skipped and rejected ones."""
    if "node_ids" not in args and "ids" not in args:
        err = f"select needs 'node_ids', a list of node ids; it got the keys {sorted(args)}"
        example = "[12, 7]" if answer.ids.json_type == "integer" else '["P12", "P7"]'
        return ToolResult(f"Error: {err}. Call select with, for example, {{\"node_ids\": {example}}}.", [], err)
    codec = answer.ids
    ids, bad = _as_node_ids(args.get("node_ids", args.get("ids")), codec)
    asked = list(dict.fromkeys(ids))
    added = [i for i in asked if i in answer.seen and i not in answer.chosen]
    dupes = [i for i in asked if i in answer.chosen]
    unseen = [i for i in asked if i not in answer.seen]
    answer.selected.extend(added)
    answer.chosen.update(added)
    parts = [f"Selected {len(added)} node(s): {codec.listing(added)}." if added else "Selected no new node."]
    if dupes:
        parts.append(f"Already selected, skipped: {codec.listing(dupes)}.")
    errs = []
    if unseen:
        errs.append(f"ids {codec.listing(unseen)} were not shown in any observation of this run")
    if bad:
        errs.append(f"{_show(bad)} are not ids of nodes of this graph" if codec.user
                    else f"{bad} are not node ids (node ids are integers)")
    if errs:
        parts.append("Error: " + "; ".join(errs) + f". Select only ids that {' or '.join(answer.shown_by)} returned.")
    parts.append(f"Your list now has {len(answer.selected)} node(s).")
    return ToolResult(" ".join(parts), [], "; ".join(errs) or None)


def _node_ids_schema(ts) -> dict:
    return {"type": "array", "items": node_id_schema(ts)}


TOOL = Tool(
    NAME,
    "Append node ids to your ranked answer list, best first. Only ids shown in an earlier "
    "observation of this run are accepted; ids already selected are skipped.",
    (Param("node_ids", _node_ids_schema, "Node ids to append, in rank order.",
           required=True, shown_ids=True),),
    handler=select, role="answer", kind="answer", closed=False, order=30,
    guide="put node ids on your answer list. Only ids that appeared in an observation of this run are\n"
          "  accepted. The list is ranked in the order you select: select the best candidates first. Selecting an id\n"
          "  twice has no effect.")
