"""The ARK agent loop (`Agent`, one trajectory) and the retriever (`ARKRetriever`, n agents + fusion).

Paper §3: the agent holds an ordered answer list R; each step is one LLM call that must call tools
(`tool_choice="required"`), every tool call of the step runs in order and its observation goes back as a
tool message. The agent offers the registry's tools (`ark.tools`): the graph tools (`search_graph`,
`explore_neighbors` and any other registered), run on the `ark.tools.ToolSet`, and the answer tools
`select` (append seen node ids to R) and `finish`, run on the trajectory's `ark.tools.AnswerState`; every
call goes the same way (the tool's handler on its target). The run ends at `finish` (after the rest of
that step's calls) or after `t_max` steps.

Options for small models (`AgentConfig`, all off by default, so the paper's loop stays the default):
- ``first_search``: the first step's request forces ``search_graph`` (``tool_choice`` naming that
  function); the model still writes the query and the arguments;
- ``constrain_ids``: each request's schemas list the ids shown so far as the only values of the
  parameters that take shown ids (``Param.shown_ids``: ``select``'s ``node_ids``, at most 20 per call,
  and ``explore_neighbors``' ``node_id``, an ``enum``), and leave those tools out until a graph tool has
  shown a node. A server that decodes under the schema (llama.cpp turns it into a grammar; vLLM's guided
  decoding) then cannot emit an id the agent would reject;
- ``stop_on_repeat``: the trajectory ends (stop reason "repeat") after a step that repeats a tool call,
  same name and same arguments, that was already rejected with an error in this trajectory;
- ``final_select``: the last step's request (step ``t_max``) forces ``select`` (``tool_choice`` naming
  it), so an agent that has only searched must still name the ids it would answer with; the model
  picks them, and ids it was never shown are rejected as always.

Who handles what:
- the model's mistakes (arguments that are not a JSON object, unknown tool, a tool call without a name,
  no tool call, ids never shown in an observation) become error observations fed back to the model,
  and count as steps;
- transport failures and malformed replies (an HTTP 200 that is not a chat completion) are retried
  inside `ark.llm.client.LLMClient`; the `LLMTransportError` (or `MalformedReplyError`) it raises after its
  retries ends that trajectory with stop_reason "error" and its error, R so far kept; the other agents
  go on, and `ark.run.records` records that agent as failed and the query as "degraded" (retried next run);
- `ContextLengthError`: the oldest observations are shortened and the call is retried once;
- anything else is our bug and raises.

`ARKRetriever` runs n agents per query concurrently under one `asyncio.Semaphore` that all queries of a
run share; a slot is one running agent, so at most `AgentConfig.concurrency` LLM requests are in flight. The fused ranking
follows `ark.fusion.fuse`. With a backbone in batch mode (`ark.llm.batch`) there is no semaphore: every
agent of the queries in flight runs, and each step's requests of them all go out as one batch (the
retriever tells the client's collector which agents run).

    retriever = ARKRetriever(llm, ToolSet(graph, index, ToolConfig()), graph, AgentConfig(n_agents=3))
    retrieval = asyncio.run(retriever.aretrieve("Which drugs target KCNH2?", query_id=7))
    retrieval.ranking, retrieval.agent_rankings, retrieval.trajectories[0].tool_counts()
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from dataclasses import dataclass

from ark.cost.cap import BudgetExhausted
from ark.cost.tokens import Encoded
from ark.fusion import TIE_BREAKS, fuse
from ark.llm.client import TOOL_CHOICES, ChatResponse, ContextLengthError, LLMClient, LLMTransportError, ToolCall
from ark.prompts import system_prompt
from ark.retriever import Retrieval
from ark.tools import SEARCH, SELECT, AnswerState, NodeIds, ToolResult, all_tools
from ark.tools.arguments import loads_arguments
from ark.trajectory import Step, Trajectory, tool_message

OPTIONS = ("first_search", "constrain_ids", "stop_on_repeat", "final_select")  # the AgentConfig switches for small models
MAX_SELECT = 20  # with constrain_ids: most ids one id list (select's node_ids) may name (the fused list is cut to 20)

NO_TOOL_CALL = "Error: your reply called no tool. Call one of these tools: {names}; call finish when your list is complete."
JSON_TYPE = {"list": "an array", "str": "a string", "int": "a number", "float": "a number", "bool": "a boolean",
             "NoneType": "null"}


@dataclass
class AgentConfig:
    t_max: int = 20  # T_max: most LLM calls (steps) per trajectory (paper: 20)
    n_agents: int = 3  # parallel agents per query (paper: 3)
    temperature: float | None = None  # sampling is set on the backbone; a value here must match it
    prompt_version: str = "v1"  # ark/prompts/system_<version>.md
    fuse_top: int | None = None  # fused ranking length; None keeps all (the runner cuts it, ark.analysis.metrics.scored_list)
    tie_break: str = "list"  # fusion tie-break, see ark.fusion
    tool_choice: str = "required"  # passed to the client; it downgrades where a backend lacks it
    concurrency: int = 64  # global limit of running agents when no semaphore is given
    shorten_chars: int = 300  # context-length recovery: oldest observations are cut to this length
    first_search: bool = False  # force the first step to call search_graph (tool_choice names it)
    constrain_ids: bool = False  # schemas allow only ids shown so far (select, explore_neighbors)
    stop_on_repeat: bool = False  # end the trajectory when a rejected tool call is repeated verbatim
    final_select: bool = False  # force the last step (t_max) to call select (tool_choice names it)

    def __post_init__(self) -> None:
        if self.t_max < 1:
            raise ValueError(f"t_max={self.t_max} must be >= 1")
        if self.n_agents < 1:
            raise ValueError(f"n_agents={self.n_agents} must be >= 1")
        if self.concurrency < 1:
            raise ValueError(f"concurrency={self.concurrency} must be >= 1")
        # checked here, before any agent runs (and is paid for), not at the first call or fusion
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break={self.tie_break!r} is not valid; choose one of {list(TIE_BREAKS)}")
        if self.tool_choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice={self.tool_choice!r} is not valid; choose one of {list(TOOL_CHOICES)}")


def _parse_arguments(raw: str | dict | None) -> tuple[dict | None, str | None]:
    """JSON arguments -> (dict, None) or (None, reason)."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or not str(raw).strip():
        return {}, None
    try:
        value = loads_arguments(raw)
    except json.JSONDecodeError as e:
        return None, f"not valid JSON ({e.msg} at position {e.pos})"
    if not isinstance(value, dict):
        return None, f"{JSON_TYPE.get(type(value).__name__, type(value).__name__)}, not a JSON object"
    return value, None


def _signature(tc: ToolCall) -> str:
    """A tool call's name and arguments, with JSON arguments in a canonical form."""
    args, _ = _parse_arguments(tc.arguments)
    body = json.dumps(args, sort_keys=True) if args is not None else str(tc.arguments)
    return f"{tc.name}:{body}"


def shorten_observations(messages: list[dict], max_chars: int) -> int:
    """Cut the oldest half of the over-long observation messages to `max_chars`; returns how many.

    Observations are tool messages and the error messages the agent sends as `user` turns after the
    question (message index >= 2). The newest observation is never cut.
    """
    idx = [i for i, m in enumerate(messages)
           if (m["role"] == "tool" or (m["role"] == "user" and i >= 2))
           and isinstance(m.get("content"), str) and len(m["content"]) > max_chars]
    last_obs = max((i for i, m in enumerate(messages) if m["role"] in ("tool", "user") and i >= 2), default=-1)
    idx = [i for i in idx if i != last_obs]
    cut = idx[: max(1, (len(idx) + 1) // 2)] if idx else []
    for i in cut:
        messages[i] = {**messages[i], "content": messages[i]["content"][:max_chars] + " ...[shortened]"}
    return len(cut)


class Agent:
    """One agent: runs one trajectory for one query with a given LLM client and tool set."""

    def __init__(self, llm: LLMClient, toolset, system: str, config: AgentConfig | None = None):
        self.llm = llm
        self.toolset = toolset
        self.system = system
        self.config = config or AgentConfig()
        self.graph_tool_names = list(toolset.tool_names)
        answer_tools = all_tools("answer")
        # name -> the offered Tool (graph tools reduced to the parameters the ToolConfig offers)
        self.specs = {**toolset.specs, **{t.name: t for t in answer_tools}}
        # encoded once: every request without constrain_ids sends these unchanged
        self.tools = Encoded(list(toolset.openai_tools()) + [t.openai(toolset) for t in answer_tools])
        self.tool_names = [t["function"]["name"] for t in self.tools]
        # the ids the graph tools show and read (ark.tools.ids); select reads them the same way
        self.id_space = getattr(toolset, "ids", None) or NodeIds()

    async def _chat(self, messages: list[dict], agent_index: int, tools: list[dict], tool_choice) -> ChatResponse:
        return await self.llm.chat(messages, tools, agent_index=agent_index, tool_choice=tool_choice)

    def request_tools(self, seen: set[int]) -> list[dict]:
        """The tools offered in one request: all of them, or with ``constrain_ids`` the parameters that
        take shown ids (``Param.shown_ids``) restricted to ``seen`` (their tools, select and
        explore_neighbors, left out while nothing has been shown)."""
        if not self.config.constrain_ids:
            return self.tools
        codec = self.id_space
        ids = [codec.show(i) for i in sorted(seen)]   # as the observations showed them (ark.tools.ids)
        out = []
        for tool in self.tools:
            props = tool["function"]["parameters"]["properties"]
            id_params = [p.name for p in self.specs[tool["function"]["name"]].params if p.shown_ids and p.name in props]
            if id_params:
                if not ids:
                    continue
                tool = copy.deepcopy(tool)
                props = tool["function"]["parameters"]["properties"]
                for name in id_params:
                    if props[name].get("type") == "array":
                        # bounded too: under a grammar a small model may otherwise repeat ids until the context ends
                        props[name]["items"] = {**codec.schema(), "enum": ids}
                        props[name]["maxItems"] = min(len(ids), MAX_SELECT)
                    else:
                        props[name]["enum"] = ids
            out.append(tool)
        return out

    def request_tool_choice(self, t: int, offered: list[dict] | None = None):
        """``tool_choice`` of step ``t``: the configured one, search_graph by name at step 0 with
        ``first_search`` (which wins when t_max is 1), select by name at the last step with
        ``final_select`` when the request offers select (``offered``: its tools, default all)."""
        names = self.tool_names if offered is None else [tool["function"]["name"] for tool in offered]
        if t == 0 and self.config.first_search and SEARCH in names:
            return {"type": "function", "function": {"name": SEARCH}}
        if t == self.config.t_max - 1 and self.config.final_select and SELECT in names:
            return {"type": "function", "function": {"name": SELECT}}
        return self.config.tool_choice

    async def run(self, query: str, query_id: int | str = "", agent_index: int = 0) -> Trajectory:
        """Run one trajectory; never raises for the model's mistakes or transport failures."""
        t_start = time.perf_counter()
        messages: list[dict] = [{"role": "system", "content": self.system}, {"role": "user", "content": query}]
        answer = AnswerState(shown_by=tuple(self.graph_tool_names), ids=self.id_space)
        traj = Trajectory(query_id=query_id, agent_index=agent_index, messages=messages, steps=[],
                          selected=answer.selected, stop_reason="max_steps", tools=self.tools, query=query,
                          prompt_version=self.config.prompt_version)
        rejected: set[str] = set()  # signatures of tool calls answered with an error
        for t in range(self.config.t_max):
            step_start = time.perf_counter()
            shortened = 0
            tools = self.request_tools(answer.seen)
            choice = self.request_tool_choice(t, tools)
            try:
                try:
                    response = await self._chat(messages, agent_index, tools, choice)
                except ContextLengthError:
                    shortened = shorten_observations(messages, self.config.shorten_chars)
                    if shortened == 0:
                        raise
                    response = await self._chat(messages, agent_index, tools, choice)
            except ContextLengthError as e:
                traj.stop_reason, traj.error = "error", f"ContextLengthError (after shortening {shortened} observations): {e}"
                break
            except (LLMTransportError, BudgetExhausted) as e:   # a failed call, or one the spending cap refused
                traj.stop_reason, traj.error = "error", f"{type(e).__name__}: {e}"
                break
            llm_wall = time.perf_counter() - step_start
            step, repeated = self._act(t, response, messages, answer, rejected)
            if shortened:
                note = f"context too long: shortened {shortened} oldest observations and retried"
                step.error = note if step.error is None else f"{note}; {step.error}"
            step.overhead_s = max(0.0, time.perf_counter() - step_start - llm_wall)
            traj.steps.append(step)
            if answer.finished:
                traj.stop_reason = "finish"
                break
            if repeated and self.config.stop_on_repeat:
                traj.stop_reason = "repeat"
                break
        traj.wall_s = time.perf_counter() - t_start
        return traj

    def _act(self, t: int, response: ChatResponse, messages: list[dict], answer: AnswerState,
             rejected: set[str]) -> tuple[Step, bool]:
        """Run all tool calls of one reply in order; append the messages; return (step, repeated):
        repeated when a call that failed repeats one that already failed (``rejected``)."""
        messages.append(response.to_message())
        observations: list[str] = []
        node_ids: list[list[int]] = []
        errors: list[str] = []
        repeated = False
        tool_time = 0.0
        if not response.tool_calls:
            obs = NO_TOOL_CALL.format(names=", ".join(self.tool_names))
            messages.append({"role": "user", "content": obs})
            observations.append(obs)
            node_ids.append([])
            errors.append("no tool call")
        for tc in response.tool_calls:
            obs, ids, err, dt = self._call(tc, answer)
            tool_time += dt
            messages.append(tool_message(tc.id, obs))
            observations.append(obs)
            node_ids.append(ids)
            if err:
                errors.append(f"{tc.name}: {err}")
                sig = _signature(tc)
                repeated = repeated or sig in rejected
                rejected.add(sig)
        step = Step(index=t, response=response, tool_calls=list(response.tool_calls), observations=observations,
                    llm_latency_s=response.latency_s, tool_latency_s=tool_time,
                    prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
                    error="; ".join(errors) or None, node_ids=node_ids)
        return step, repeated

    def _call(self, tc: ToolCall, answer: AnswerState) -> tuple[str, list[int], str | None, float]:
        """One tool call -> (observation, node ids shown, error, tool seconds): the tool's handler runs on
        its target, the tool set (graph tools) or the answer state (answer tools)."""
        if not tc.name:
            return (f"Error: your tool call has no function name. Call one of: {', '.join(self.tool_names)}.",
                    [], "tool call without a name", 0.0)
        spec = self.specs.get(tc.name)
        if spec is None:
            err = f"unknown tool {tc.name!r}"
            return (f"Error: there is no tool named {tc.name!r}. Call one of: {', '.join(self.tool_names)}.",
                    [], err, 0.0)
        args, why = _parse_arguments(tc.arguments)
        if args is None:
            err = f"arguments are {why}"
            return (f"Error: the arguments of {tc.name} are {why}. Send one JSON object with the tool's "
                    "parameters.", [], err, 0.0)
        target = {"graph": self.toolset, "answer": answer}[spec.role]
        t0 = time.perf_counter()
        result: ToolResult = target.call(tc.name, args)
        dt = time.perf_counter() - t0
        ids = [int(i) for i in result.node_ids]
        answer.show(ids)
        return result.observation, ids, result.error, dt


class ARKRetriever:
    """n parallel agents per query, fused (paper §3.2). Implements the retriever interface.

    `semaphore` (or `config.concurrency`) bounds the running agents across all concurrent
    `aretrieve` calls that share this retriever (or the semaphore). A query's cost is the sum of its
    replies' `cost_usd` (the client's price table; cached replies keep their original cost).
    Sampling (temperature, seed) belongs to the backbone: `config.temperature`, when set, must equal
    `llm.config.temperature`, so a run never records a temperature it did not use.
    """

    def __init__(self, llm: LLMClient, toolset, graph, config: AgentConfig | None = None, *,
                 semaphore: asyncio.Semaphore | None = None):
        self.config = config or AgentConfig()
        backbone_t = getattr(getattr(llm, "config", None), "temperature", None)
        if self.config.temperature is not None and backbone_t is not None and self.config.temperature != backbone_t:
            raise ValueError(f"AgentConfig.temperature={self.config.temperature} differs from the backbone's "
                             f"temperature={backbone_t}; set the temperature on the backbone config")
        self.llm = llm
        self.graph = graph
        system = system_prompt(graph, self.config.prompt_version,
                               tool_names=[t["function"]["name"] for t in toolset.openai_tools()], toolset=toolset)
        self.agent = Agent(llm, toolset, system, self.config)
        self._semaphore = semaphore
        self._own_semaphore: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def semaphore(self) -> asyncio.Semaphore:
        """The shared semaphore (one per event loop when this retriever made it)."""
        if self._semaphore is not None:
            return self._semaphore
        loop = asyncio.get_running_loop()
        if self._own_semaphore is None or self._own_semaphore[0] is not loop:
            self._own_semaphore = (loop, asyncio.Semaphore(self.config.concurrency))
        return self._own_semaphore[1]

    async def _run_agent(self, query: str, query_id: int | str, i: int) -> Trajectory:
        collector = getattr(self.llm, "batch", None)
        if collector is not None:   # batch mode: no slot to wait for; the step's batch waits for this agent
            try:
                return await self.agent.run(query, query_id, agent_index=i)
            finally:
                collector.unregister()
        async with self.semaphore():
            return await self.agent.run(query, query_id, agent_index=i)

    async def aretrieve(self, query: str, query_id: int | str = "") -> Retrieval:
        """Run the n agents concurrently and fuse their lists."""
        collector = getattr(self.llm, "batch", None)
        if collector is not None:   # counted before any of them runs: the step's batch waits for each
            collector.register(self.config.n_agents)
        trajs = await asyncio.gather(*(self._run_agent(query, query_id, i) for i in range(self.config.n_agents)))
        trajs = list(trajs)
        agent_rankings = [list(t.selected) for t in trajs]
        ranking = fuse(agent_rankings, top=self.config.fuse_top, tie_break=self.config.tie_break)
        prompt_tokens = sum(t.prompt_tokens for t in trajs)
        completion_tokens = sum(t.completion_tokens for t in trajs)
        cost = sum(s.response.cost_usd for t in trajs for s in t.steps if s.response is not None)
        failed = [t for t in trajs if t.stop_reason == "error"]
        error = None
        if failed and len(failed) == len(trajs):
            error = f"all {len(trajs)} agents failed: " + " | ".join(f"agent {t.agent_index}: {t.error}" for t in failed)
        return Retrieval(ranking=ranking, agent_rankings=agent_rankings, trajectories=trajs,
                         latency_s=max((t.latency_s for t in trajs), default=0.0),
                         prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                         cost_usd=cost, error=error)

    async def aclose(self) -> None:
        """Release the LLM client's HTTP connections (it makes new ones if used again)."""
        await self.llm.aclose()

    def retrieve(self, query: str) -> list[int]:
        """Synchronous convenience: the fused ranking for one query (in an event loop of its own)."""
        async def once() -> Retrieval:
            try:
                return await self.aretrieve(query)
            finally:
                await self.aclose()

        return asyncio.run(once()).ranking
