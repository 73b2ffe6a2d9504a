"""The record of one agent's run on one query: `Step` and `Trajectory` (paper §3, τ = ((s_t, A_t, o_t))_t).

A trajectory is both the log and the prompt: `messages` is the OpenAI chat history the model saw
(system, user, then per step one assistant message with its tool calls followed by one tool message per
call; a reply without tool calls is answered by a `user` message with the error). After a context-length
retry the oldest observations stay shortened, as the later calls saw them. `steps` holds the per-step bookkeeping (raw response, parsed tool calls, observations, LLM and
tool latency, tokens, the model's mistakes). Records round-trip through JSON (`to_json`/`from_json`), and
`to_chat()` gives the {"messages", "tools"} form the distillation trains on.

    traj = Trajectory.from_json(json.load(open("results/runs/.../trajectories/17.json"))[0])
    traj.selected, traj.stop_reason, traj.tool_counts()
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ark.llm.client import ChatResponse, ToolCall

STOP_REASONS = ("finish", "max_steps", "error", "repeat")


@dataclass
class Step:
    """One LLM call and the tool calls it made, in order.

    `observations[i]` answers `tool_calls[i]`; a reply without tool calls gets one error observation.
    `node_ids[i]` are the node ids observation i showed (what `select` may pick from later).
    `error` joins the model's mistakes in this step (bad JSON, unknown tool, unseen ids, no tool call).
    `overhead_s` is the step's wall time outside the LLM call (tools + bookkeeping).
    """

    index: int
    response: ChatResponse | None
    tool_calls: list[ToolCall]
    observations: list[str]
    llm_latency_s: float
    tool_latency_s: float
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None
    node_ids: list[list[int]] = field(default_factory=list)
    overhead_s: float = 0.0

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "response": None if self.response is None else self.response.to_json(),
            "tool_calls": [t.to_json() for t in self.tool_calls],
            "observations": list(self.observations),
            "llm_latency_s": self.llm_latency_s,
            "tool_latency_s": self.tool_latency_s,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "error": self.error,
            "node_ids": [list(map(int, ids)) for ids in self.node_ids],
            "overhead_s": self.overhead_s,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Step":
        return cls(
            index=int(d["index"]),
            response=None if d.get("response") is None else ChatResponse.from_json(d["response"]),
            tool_calls=[ToolCall.from_json(t) for t in d.get("tool_calls", [])],
            observations=list(d.get("observations", [])),
            llm_latency_s=float(d.get("llm_latency_s", 0.0)),
            tool_latency_s=float(d.get("tool_latency_s", 0.0)),
            prompt_tokens=int(d.get("prompt_tokens", 0)),
            completion_tokens=int(d.get("completion_tokens", 0)),
            error=d.get("error"),
            node_ids=[list(ids) for ids in d.get("node_ids", [])],
            overhead_s=float(d.get("overhead_s", 0.0)),
        )


@dataclass
class Trajectory:
    """One agent's run on one query.

    stop_reason: "finish" (the model called finish), "max_steps" (T_max reached), "error" (the LLM
    transport failed after retries, or the context stayed too long after shortening; see `error`) or
    "repeat" (`AgentConfig.stop_on_repeat`: the model repeated a tool call that had been rejected).
    `selected` is the agent's ordered answer list R. `tools` is the tool list the model was given
    (with `AgentConfig.constrain_ids`, each request narrowed its id parameters to the ids shown).
    """

    query_id: int | str
    agent_index: int
    messages: list[dict]
    steps: list[Step]
    selected: list[int]
    stop_reason: str
    tools: list[dict] = field(default_factory=list)
    error: str | None = None
    query: str = ""
    prompt_version: str = ""
    wall_s: float = 0.0

    def __post_init__(self) -> None:
        if self.stop_reason not in STOP_REASONS:
            raise ValueError(f"stop_reason={self.stop_reason!r} is not valid; choose one of {list(STOP_REASONS)}")

    # ---- aggregates -------------------------------------------------------------------------------
    @property
    def latency_s(self) -> float:
        """Active time: LLM calls + step overhead (excludes waiting for a concurrency slot)."""
        return sum(s.llm_latency_s + s.overhead_s for s in self.steps)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.steps)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.steps)

    def tool_counts(self) -> dict[str, int]:
        """Number of calls per tool name over all steps, e.g. {"search_graph": 3, "explore_neighbors": 5}.

        Counts every call the model made, including `select`/`finish` and malformed calls.
        """
        return dict(Counter(tc.name for s in self.steps for tc in s.tool_calls))

    # ---- serialization ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "agent_index": self.agent_index,
            "query": self.query,
            "prompt_version": self.prompt_version,
            "messages": self.messages,
            "tools": self.tools,
            "steps": [s.to_json() for s in self.steps],
            "selected": [int(v) for v in self.selected],
            "stop_reason": self.stop_reason,
            "error": self.error,
            "wall_s": self.wall_s,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Trajectory":
        return cls(
            query_id=d["query_id"],
            agent_index=int(d["agent_index"]),
            messages=list(d["messages"]),
            steps=[Step.from_json(s) for s in d.get("steps", [])],
            selected=[int(v) for v in d.get("selected", [])],
            stop_reason=d["stop_reason"],
            tools=list(d.get("tools", [])),
            error=d.get("error"),
            query=d.get("query", ""),
            prompt_version=d.get("prompt_version", ""),
            wall_s=float(d.get("wall_s", 0.0)),
        )

    def to_chat(self) -> dict[str, list[dict]]:
        """{"messages": [...], "tools": [...]} in OpenAI chat format, what SFT trains on.

        Assistant turns carry `tool_calls` ({"id", "type": "function", "function": {"name", "arguments"}})
        and each call is answered by a {"role": "tool", "tool_call_id", "content"} message.
        """
        return {"messages": [dict(m) for m in self.messages], "tools": [dict(t) for t in self.tools]}


def tool_message(tool_call_id: str, content: str) -> dict:
    """The OpenAI chat message answering one tool call."""
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}
