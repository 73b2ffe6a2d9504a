"""What the answer tools act on: `AnswerState`, the agent's answer in one trajectory.

The graph tools run against the graph (`ark.tools.toolset.ToolSet`); the answer tools (``select``,
``finish``, any other tool of role ``"answer"``) run against the trajectory's `AnswerState`: the ranked
answer list R (internal ids), the ids the graph tools have shown so far (the only ones ``select``
accepts), the ids chosen, whether ``finish`` was called, and the id space the graph tools show
(`ark.tools.ids.NodeIds`: ``select`` reads its ids in it). `ark.agent.Agent` makes one per trajectory,
records the ids each observation shows (`AnswerState.show`) and ends the trajectory after the step that
finished it.

    state = AnswerState(shown_by=("search_graph", "explore_neighbors"))
    state.show([3, 6])
    state.call("select", {"node_ids": [6, 3]}).observation   # 'Selected 2 node(s): [6, 3]. ...'
    state.selected, state.finished                            # [6, 3], False
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ark.tools import registry as tool_registry
from ark.tools.ids import NodeIds
from ark.tools.toolset import ToolInputError, ToolResult, _show, error_result


@dataclass
class AnswerState:
    """One trajectory's answer, changed only by the answer tools."""

    selected: list[int] = field(default_factory=list)  # R: the ranked answer list, best first
    seen: set[int] = field(default_factory=set)  # ids shown in an observation of this trajectory so far
    chosen: set[int] = field(default_factory=set)  # the ids in `selected`
    finished: bool = False  # finish was called
    shown_by: tuple[str, ...] = ()  # the graph tools offered, whose observations show ids (named in errors)
    ids: NodeIds = field(default_factory=NodeIds)  # the id space of the graph tools (ark.tools.ids): select reads it

    def show(self, ids: Iterable[int]) -> None:
        """Record the ids one observation showed: from now on they may be selected."""
        self.seen.update(ids)

    def call(self, name: str, args: dict) -> ToolResult:
        """Run the answer tool ``name`` on this state; a bad argument gives an error observation."""
        answer_tools = {t.name: t for t in tool_registry.all_tools("answer")}
        try:
            tool = answer_tools.get(name)
            if tool is None:
                raise ToolInputError(f"there is no answer tool named {_show(name)}; "
                                     f"call one of: {', '.join(answer_tools)}")
            return tool.handler(self, args)
        except ToolInputError as e:
            return error_result(e)
