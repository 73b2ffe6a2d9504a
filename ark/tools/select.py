"""The ``select`` tool: its schema, its texts and its handler, which appends ids to the agent's answer.

``select(node_ids)`` appends, in order, the ids that a graph tool showed in this trajectory and that are
not chosen yet to the answer list R (`ark.tools.answer.AnswerState`); it reports the ids it skipped
(already selected) and rejects those never shown or not ids. Lenient on form (an ``ids`` key, a bare
id, ids as digit strings), strict on content.

    state = AnswerState(seen={3, 6}, shown_by=("search_graph",))
    select(state, {"node_ids": [6, 99]}).observation
"""

from __future__ import annotations

from ark.tools.answer import AnswerState
from ark.tools.registry import Param, Tool
from ark.tools.toolset import ToolInputError, ToolResult, _as_int

NAME = "select"


def _as_node_ids(value: object) -> tuple[list[int], list[object]]:
    """Coerce the `node_ids` argument to ints; returns (ids, unparseable values)."""
    items = value if isinstance(value, list) else [value]
    ids, bad = [], []
    for item in items:
        try:
            ids.append(_as_int("node_ids", item))
        except ToolInputError:
            bad.append(item)
    return ids, bad


def select(answer: AnswerState, args: dict) -> ToolResult:
    """The handler: append the seen, not yet chosen ids in order; report skipped and rejected ones."""
    if "node_ids" not in args and "ids" not in args:
        err = f"select needs 'node_ids', a list of node ids; it got the keys {sorted(args)}"
        return ToolResult(f"Error: {err}. Call select with, for example, {{\"node_ids\": [12, 7]}}.", [], err)
    ids, bad = _as_node_ids(args.get("node_ids", args.get("ids")))
    asked = list(dict.fromkeys(ids))
    added = [i for i in asked if i in answer.seen and i not in answer.chosen]
    dupes = [i for i in asked if i in answer.chosen]
    unseen = [i for i in asked if i not in answer.seen]
    answer.selected.extend(added)
    answer.chosen.update(added)
    parts = [f"Selected {len(added)} node(s): {added}." if added else "Selected no new node."]
    if dupes:
        parts.append(f"Already selected, skipped: {dupes}.")
    errs = []
    if unseen:
        errs.append(f"ids {unseen} were not shown in any observation of this run")
    if bad:
        errs.append(f"{bad} are not node ids (node ids are integers)")
    if errs:
        parts.append("Error: " + "; ".join(errs) + f". Select only ids that {' or '.join(answer.shown_by)} returned.")
    parts.append(f"Your list now has {len(answer.selected)} node(s).")
    return ToolResult(" ".join(parts), [], "; ".join(errs) or None)


TOOL = Tool(
    NAME,
    "Append node ids to your ranked answer list, best first. Only ids shown in an earlier "
    "observation of this run are accepted; ids already selected are skipped.",
    (Param("node_ids", {"type": "array", "items": {"type": "integer"}}, "Node ids to append, in rank order.",
           required=True, shown_ids=True),),
    handler=select, role="answer", kind="answer", closed=False, order=30,
    guide="put node ids on your answer list. Only ids that appeared in an observation of this run are\n"
          "  accepted. The list is ranked in the order you select: select the best candidates first. Selecting an id\n"
          "  twice has no effect.")
