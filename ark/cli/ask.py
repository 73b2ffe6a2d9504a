"""``ark ask``: ARK on one question, with every agent's tool calls and observations shown as they happen.

    ark ask "Which genes are linked to aortic aneurysm?" --graph demo --backbone local
    ark ask "..." --graph my_kg --backbone gpt-4.1 --base-url http://localhost:8000/v1 --model my-model

The agents are the ones the runs use (`ark.agent.ARKRetriever` over the agent's `ark.tools.toolset.ToolSet`);
two thin wrappers report what passes through them, without changing it: the LLM client (each reply's
tool calls, with the agent's number) and the tool set (each observation, attributed to the agent whose
asyncio task made the call). The terminal view is printed with rich as events arrive; at the end the
fused ranking is shown with votes, node names, types and the graph's own ids.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")


class _Reporter:
    """Prints events of the agents as they come (one color per agent)."""

    def __init__(self, console: Console, full: bool, lines: int = 6):
        self.console = console
        self.full = full
        self.lines = lines
        self.agent_of: dict[asyncio.Task, int] = {}
        self.steps: Counter = Counter()

    def _tag(self, i: int) -> Text:
        return Text(f"agent {i + 1}", style=f"bold {COLORS[i % len(COLORS)]}")

    def calls(self, i: int, response) -> None:
        self.steps[i] += 1
        for tc in response.tool_calls or []:
            line = Text.assemble(self._tag(i), f" step {self.steps[i]}: ", (tc.name, "bold"), " ",
                                 _args(tc.arguments))
            self.console.print(line, soft_wrap=True)
        if not response.tool_calls and response.content:
            self.console.print(Text.assemble(self._tag(i), f" step {self.steps[i]}: (no tool call) ",
                                             (response.content[:200], "dim")), soft_wrap=True)

    def observation(self, i: int | None, text: str, error: bool) -> None:
        body = text if self.full else _head(text, self.lines)
        style = "red" if error else "dim"
        bar = ("  | ", COLORS[i % len(COLORS)] if i is not None else "dim")
        for line in body.splitlines():   # soft wrap: the text as the agent reads it, the terminal wraps it
            self.console.print(Text.assemble(bar, (line, style)), soft_wrap=True)


def _args(raw) -> str:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
        return json.dumps(value, ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return repr(raw)


def _head(text: str, n: int) -> str:
    lines = text.splitlines()
    if len(lines) <= n + 1:
        return text
    return "\n".join(lines[:n] + [f"… {len(lines) - n - 1} more lines …", lines[-1]])


class _ReportingLLM:
    """The LLM client, reporting each reply's tool calls (and remembering which task is which agent)."""

    def __init__(self, llm, reporter: _Reporter):
        self._llm = llm
        self._reporter = reporter

    async def chat(self, messages, tools, *, agent_index: int = 0, **kw):
        task = asyncio.current_task()
        if task is not None:
            self._reporter.agent_of[task] = agent_index
        response = await self._llm.chat(messages, tools, agent_index=agent_index, **kw)
        self._reporter.calls(agent_index, response)
        return response

    def __getattr__(self, name):
        return getattr(self._llm, name)


class _ReportingTools:
    """The tool set, reporting each observation."""

    def __init__(self, tools, reporter: _Reporter):
        self._tools = tools
        self._reporter = reporter

    def call(self, name, arguments):
        result = self._tools.call(name, arguments)
        task = asyncio.current_task()
        self._reporter.observation(self._reporter.agent_of.get(task) if task else None,
                                   result.observation, bool(result.error))
        return result

    def __getattr__(self, name):
        return getattr(self._tools, name)


def ask(question: str, graph, tools, backbone, n_agents: int = 3, t_max: int = 20, top: int = 10,
        llm_cache: str | None = None, full: bool = False, console: Console | None = None) -> int:
    """Run ARK on ``question`` and print the live trace and the fused answer; returns an exit status
    (0, or 1 when every agent failed)."""
    from pathlib import Path

    from ark.agent import AgentConfig, ARKRetriever
    from ark.llm.client import LLMClient
    from ark.llm.local_server import serving

    console = console or Console(highlight=False)
    reporter = _Reporter(console, full)
    if llm_cache:
        Path(llm_cache).parent.mkdir(parents=True, exist_ok=True)
    config = AgentConfig(t_max=t_max, n_agents=n_agents)
    console.print(Text.assemble(("question: ", "bold"), question))
    console.print(Text(f"graph {graph.name} ({graph.num_nodes:,} nodes), backbone {backbone.name} "
                       f"({backbone.model}), {n_agents} agent(s), T_max {t_max}", style="dim"))
    with serving(backbone):
        llm = LLMClient(backbone, cache=llm_cache)
        retriever = ARKRetriever(_ReportingLLM(llm, reporter), _ReportingTools(tools, reporter), graph, config)
        retrieval = _run(retriever, question)
    from ark.cost.prices import money

    stops = [t.stop_reason for t in retrieval.trajectories]
    votes = Counter(i for r in retrieval.agent_rankings for i in r)
    table = Table(title="fused answer", title_justify="left")
    for col in ("rank", "id", "name", "type", "votes"):
        table.add_column(col, justify="right" if col in ("rank", "votes") else "left")
    if graph.has_external_ids:
        table.columns[1].header = "id (internal)"
    for r, i in enumerate(retrieval.ranking[:top], 1):
        shown = f"{graph.external_id(i)} ({i})" if graph.has_external_ids else str(i)
        table.add_row(str(r), shown, graph.node_name(i), graph.node_type_name(i), f"{votes[i]}/{n_agents}")
    console.print(table if retrieval.ranking else Text("no node was selected", style="bold red"))
    console.print(Text(f"stop reasons: {', '.join(stops)}; tokens {retrieval.prompt_tokens + retrieval.completion_tokens:,}"
                       f", ${money(retrieval.cost_usd)}, {retrieval.latency_s:.1f} s", style="dim"))
    return 1 if stops and all(s == "error" for s in stops) else 0


def _run(retriever, question: str):
    async def once():
        try:
            return await retriever.aretrieve(question)
        finally:
            await retriever.aclose()

    return asyncio.run(once())
