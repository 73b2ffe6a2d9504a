"""Where a student decides between one tool call and several: after the first call of a step.

A teacher step that makes several calls (`sft_data.several_calls`) and one that makes one are, token for token,
the same up to the end of the first call; the next token either closes the turn or opens a second call. A
`Decision` is that point in one teacher trajectory: the tokens before it in the student's chat format, the
token that goes on with a second call, the one that ends the turn, and which of the two the teacher chose.
Scoring those two tokens under a student (scripts/probe_multi_call.py) says whether it learned when its
teacher makes a second call, whatever it decodes elsewhere.

    from ark.distill.decisions import decisions
    for d in decisions(chat, tokenizer, student.render_kwargs()):
        d.prefix, d.go_on, d.stop, d.teacher_goes_on
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ark.distill.sft_data import ends_trajectory, step_of_several_calls, tokenize_chat


@dataclass(frozen=True)
class Decision:
    turn: int             # which assistant turn of the chat (0: the first step)
    first_call: str       # the tool the step calls first
    prefix: list[int]     # the chat's tokens up to the end of that call
    go_on: int            # the next token when a second call follows
    stop: int             # the next token when the turn ends after one call
    teacher_goes_on: bool


def _cut(messages: list[dict], index: int, calls: list[dict]) -> list[dict]:
    """The messages before `index`, then the assistant message at `index` with `calls` as its tool calls."""
    return [*messages[:index], {**messages[index], "tool_calls": calls}]


def decisions(chat: dict[str, Any], tokenizer, render_kwargs: dict[str, Any] | None = None) -> list[Decision]:
    """Every step of the chat whose first call searches or explores (a select or finish ends the trajectory):
    the chat cut after that step's first call, rendered once with the turn ending there and once with a second
    call after it; the two renderings part at the decision's token."""
    out: list[Decision] = []
    messages = chat["messages"]
    turn = -1
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        turn += 1
        calls = m.get("tool_calls") or []
        if not calls or ends_trajectory(calls[0]):
            continue
        one, two = (tokenize_chat({**chat, "messages": _cut(messages, i, calls[:1] * n)}, tokenizer,
                                  render_kwargs)["input_ids"] for n in (1, 2))
        p = next(k for k, (a, b) in enumerate(zip(one, two)) if a != b)
        out.append(Decision(turn, calls[0]["function"]["name"], one[:p], two[p], one[p],
                            step_of_several_calls(calls)))
    return out
