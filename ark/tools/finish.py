"""The ``finish`` tool: its schema, its texts and its handler, which marks the agent's answer final.

``finish()`` sets `ark.tools.answer.AnswerState.finished`; the agent runs the rest of that step's calls
and ends the trajectory (stop reason "finish") with the selected list as its answer.
"""

from __future__ import annotations

from ark.tools.answer import AnswerState
from ark.tools.registry import Tool
from ark.tools.toolset import ToolResult

NAME = "finish"


def finish(answer: AnswerState, args: dict) -> ToolResult:
    """The handler: the answer is final."""
    answer.finished = True
    return ToolResult(f"Finished with {len(answer.selected)} selected node(s).", [])


TOOL = Tool(
    NAME, "Stop exploring; your selected list is the answer.", (),
    handler=finish, role="answer", kind="answer", closed=False, order=40,
    guide="stop. Call it once you have selected what you found, or when more searching will not help.")
