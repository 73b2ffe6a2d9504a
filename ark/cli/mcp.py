"""A knowledge graph for any MCP client: ARK's graph tools, a description of the graph and, with a
backbone, the whole ARK agent as one tool, served over the Model Context Protocol.

    ark mcp --graph my_kg                                  # stdio; an MCP client's server entry:
    {"command": "ark", "args": ["mcp", "--graph", "path/to/my_kg"]}
    ark mcp --graph my_kg --http 127.0.0.1:8765            # streamable HTTP at http://127.0.0.1:8765/mcp
    {"url": "http://127.0.0.1:8765/mcp"}
    ark mcp --graph my_kg --backbone gpt-4.1 [--n-agents 3 --t-max 20]   # adds the ask tool

Built with the official ``mcp`` SDK's ``MCPServer`` (called FastMCP before mcp 2); `build_server` makes it,
`serve` runs it on stdio or on the SDK's streamable HTTP transport (uvicorn, at the SDK's default path
``/mcp``). One process loads the graph once and serves every client and session from it: the graph
tools run in the SDK's worker threads (the tool set is safe to share), ``ask`` in the event loop.

- **Tools.** Each graph tool of the agent's `ark.tools.toolset.ToolSet` is one MCP tool with the **same
  name, description and JSON schema** (``ToolSet.openai_tools()``), and a call returns the **same
  observation text** the agent reads (``ToolSet.call``), ids included: the graph's own ids where it has
  them (a tables graph's ``id`` column, an RDF graph's IRIs; ``--no-user-ids`` shows the internal ones,
  `ark.tools.ids`), in the node lines and in every id argument. Arguments go to ``ToolSet.call`` as the
  client sent them, so they are checked and coerced exactly as for the agent (unknown argument names
  included: they reach ``ToolSet.call`` instead of pydantic); a call the tool rejects comes back as an MCP
  tool error (``isError``) carrying the tool's one-line message after the SDK's ``Error executing tool
  <name>:``, and the server keeps serving. Opt-in tools (``--switch find_paths=true``) are served when on.
- **Resource** ``ark://graph`` (JSON, `describe_graph`): the graph's name, node and edge counts, node
  types and relations with their counts, the typed relation schema (source type, relation, target
  type, edges), the relations stored both ways, the id format (space, JSON type, examples) and the tools
  served.
- **ask** (only with ``--backbone``): ARK on one question, n agents fused (`ark.agent.ARKRetriever`, as
  ``ark ask`` runs it); returns the ranked nodes (id, internal id, name, type, votes), each agent's
  trajectory summary (its calls, stop reason, selection) and the cost (tokens, US$), as structured
  output and as JSON text. Every agent failing is a tool error in one line; some failing, status
  ``degraded`` with their errors. ``ask`` spends under a cap of its own (``--ask-max-usd``, default
  `ASK_CAP_USD`, for the server's whole life; `ark.cost.cap.Budget`): a call starts only when its worst
  case fits, each answer says what ask has paid so far (``spend``), and once the cap is reached every ask
  is a tool error in one line, with no call made.
- **Who may call.** On a loopback address (127.0.0.1, ::1, localhost) the server is today's: the SDK
  accepts local Host and Origin headers only, and no token. Bound beyond loopback (``--http
  0.0.0.0:8765``), every request must carry ``Authorization: Bearer <token>``: the token in
  `TOKEN_ENV` (``ARK_MCP_TOKEN``), else one made at start and printed once on stderr, never written
  elsewhere; a request with an ``Origin`` header (a browser's) must come from an origin of
  ``--allow-origin`` (none by default). Refused requests get 401 or 403 and reach no tool
  (`Guard`). Setting `TOKEN_ENV` asks for the token on loopback too.
"""

from __future__ import annotations

import hmac
import inspect
import ipaddress
import json
import os
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

GRAPH_URI = "ark://graph"   # the resource describing the served graph
HTTP_PATH = "/mcp"          # the SDK's default path of its streamable HTTP transport
TOKEN_ENV = "ARK_MCP_TOKEN" # the bearer token a server beyond loopback asks for (else one is made)
MIN_TOKEN_CHARS = 16
ASK_CAP_USD = 1.0           # what ask may spend in one server's life unless --ask-max-usd says otherwise


def _tool(tools, spec: dict):
    """One MCP tool for the OpenAI-style function ``spec`` of ``tools`` (a `ToolSet`)."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool

    fn_spec = spec["function"]
    name, schema = fn_spec["name"], fn_spec["parameters"]

    def call(**arguments: Any) -> str:
        result = tools.call(name, {k: v for k, v in arguments.items() if v is not None})
        if result.error:
            raise ToolError(result.error)   # the tool's one sentence, as the agent reads it after "Error: "
        return result.observation

    # the SDK reads parameters from the signature: one optional keyword per schema property, values
    # passed through untouched (ToolSet.call checks them); the published schema is the tool's own
    call.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Any)
         for p in schema["properties"]], return_annotation=str)
    call.__name__ = name
    tool = Tool.from_function(call, name=name, description=fn_spec["description"], structured_output=False)
    # pydantic would drop unknown argument names (or, forbidden, answer with its own multi-line report);
    # pass them on, so ToolSet.call rejects them in the one line the agent reads, naming the valid ones
    base = tool.fn_metadata.arg_model
    passthrough = type(f"{name}_arguments", (base,), {
        "model_config": ConfigDict(arbitrary_types_allowed=True, extra="allow"),
        "model_dump_one_level": lambda self: {**base.model_dump_one_level(self), **(self.model_extra or {})}})
    metadata = tool.fn_metadata.model_copy(update={"arg_model": passthrough})
    return tool.model_copy(update={"parameters": schema, "fn_metadata": metadata})


# ------------------------------------------------------------------------------ the graph resource
def relation_schema(graph) -> list[dict]:
    """The typed relation schema: one row per (source type, relation, target type) of the stored edges,
    with its edge count, most edges first."""
    src, dst, rel = graph.stored_edges()
    if not len(src):
        return []
    types = np.asarray(graph.node_types).astype(np.int64)
    nt, nr = len(graph.node_type_names), max(len(graph.relation_names), 1)
    keys, counts = np.unique((types[src] * nr + rel) * nt + types[dst], return_counts=True)
    rows = [{"source_type": graph.node_type_names[int(k) // (nr * nt)],
             "relation": graph.relation_names[(int(k) // nt) % nr],
             "target_type": graph.node_type_names[int(k) % nt], "edges": int(c)} for k, c in zip(keys, counts)]
    return sorted(rows, key=lambda r: (-r["edges"], r["source_type"], r["relation"], r["target_type"]))


def describe_graph(tools, ask: bool = False) -> dict:
    """What a client reads before its first call: the graph's counts, vocabularies, relation schema, id
    format and the tools served (``ask``: whether the ask tool is)."""
    g = tools.graph
    stats = g.stats()
    return {"name": g.name, "nodes": g.num_nodes, "edges": g.num_edges, "candidates": len(g.candidate_ids),
            "node_types": stats["nodes_per_type"], "relations": stats["edges_per_relation"],
            "schema": relation_schema(g), "relations_stored_both_ways": list(g.both_ways_relations),
            "edges_explored": ("as stark-qa's get_neighbor_nodes: each node's own stored edges (the graph is "
                               "undirected; a pair may carry one relation each way)") if g.outgoing_only else
                              "in both directions (explore_neighbors shows -> r for v -r-> u, <- r for u -r-> v)",
            "ids": tools.ids.describe(), "tools": tools.tool_names + (["ask"] if ask else [])}


# ------------------------------------------------------------------------------ ask: ARK as one tool
class RankedNode(BaseModel):
    rank: int
    id: int | str            # as the graph tools show it
    internal_id: int
    name: str
    type: str
    votes: int               # agents whose list has it


class AgentSummary(BaseModel):
    agent: int
    steps: int
    stop_reason: str         # finish | max_steps | repeat | error
    calls: list[str]         # the agent's tool calls in order, as name(arguments)
    tool_calls: dict[str, int]
    selected: list[int | str]
    error: str | None = None


class Cost(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    usd: float               # at the backbone's price table (cached replies keep their first cost)


class Spend(BaseModel):
    ask_paid_usd: float      # what ask has paid since the server started (this answer included)
    ask_cap_usd: float | None   # its cap (--ask-max-usd)


class Answer(BaseModel):
    question: str
    status: str              # ok | degraded (some agents failed)
    ranking: list[RankedNode]
    agents: list[AgentSummary]
    cost: Cost
    latency_s: float
    backbone: str
    model: str
    n_agents: int
    t_max: int
    spend: Spend | None = None


@dataclass
class Asker:
    """ARK on one question with a configured backbone: ``await asker(question)`` -> `Answer`."""

    tools: Any                  # the ToolSet the graph tools serve
    backbone: Any               # ark.llm.client.BackboneConfig
    n_agents: int = 3
    t_max: int = 20
    llm_cache: str | None = None
    top: int = 20
    cap_usd: float | None = ASK_CAP_USD   # what ask may spend in this server's life (None: no cap)
    budget: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        from ark.cost.cap import Budget
        from ark.llm.client import LLMClient

        if self.cap_usd is not None and self.cap_usd < 0:
            raise ValueError(f"--ask-max-usd takes US$ >= 0, got {self.cap_usd}")
        LLMClient(self.backbone)   # the backbone's credentials, checked before the server starts
        self.budget = Budget(self.cap_usd, label="mcp ask")   # shared by every ask of this server

    def refusal(self) -> str:
        """The one line of an ask refused at the cap."""
        from ark.cost.prices import money

        return (f"ask is refused: its spending cap --ask-max-usd={money(self.cap_usd)} is reached (ask has paid "
                f"${money(self.budget.paid)} since this server started); restart ark mcp with a higher "
                "--ask-max-usd to ask more")

    async def __call__(self, question: str, top: int | None = None) -> Answer:
        from ark.agent import AgentConfig, ARKRetriever
        from ark.llm.client import LLMClient

        from ark.cost.cap import stopped_by_budget

        if not isinstance(question, str) or not question.strip():
            raise ValueError("question is empty; ask one question in words")
        if self.budget.exhausted:
            raise ValueError(self.refusal())
        # one client per call: its HTTP connections live in this call's task, closed however it ends
        retriever = ARKRetriever(LLMClient(self.backbone, cache=self.llm_cache, budget=self.budget), self.tools,
                                 self.tools.graph, AgentConfig(t_max=self.t_max, n_agents=self.n_agents))
        try:
            retrieval = await retriever.aretrieve(question)
        finally:
            await retriever.aclose()
        if stopped_by_budget(retrieval.error) or any(stopped_by_budget(t.error) for t in retrieval.trajectories):
            raise ValueError(self.refusal())   # cut short at the cap: no partial answer passed off as one
        if retrieval.error:
            raise RuntimeError(retrieval.error)
        answer = self.answer(question, retrieval, top or self.top)
        answer.spend = Spend(ask_paid_usd=self.budget.paid, ask_cap_usd=self.cap_usd)
        return answer

    def answer(self, question: str, retrieval, top: int) -> Answer:
        g, ids = self.tools.graph, self.tools.ids
        votes: dict[int, int] = {}
        for ranking in retrieval.agent_rankings:
            for i in set(ranking):
                votes[i] = votes.get(i, 0) + 1
        ranked = [RankedNode(rank=r, id=ids.show(i), internal_id=int(i), name=g.node_name(i),
                             type=g.node_type_name(i), votes=votes.get(i, 0))
                  for r, i in enumerate(retrieval.ranking[:top], 1)]
        agents = [AgentSummary(agent=t.agent_index, steps=len(t.steps), stop_reason=t.stop_reason,
                               calls=[f"{c.name}({_arguments(c.arguments)})" for s in t.steps for c in s.tool_calls],
                               tool_calls=t.tool_counts(), selected=[ids.show(i) for i in t.selected], error=t.error)
                  for t in retrieval.trajectories]
        status = "degraded" if any(t.stop_reason == "error" for t in retrieval.trajectories) else "ok"
        return Answer(question=question, status=status, ranking=ranked, agents=agents,
                      cost=Cost(prompt_tokens=retrieval.prompt_tokens, completion_tokens=retrieval.completion_tokens,
                                usd=float(retrieval.cost_usd)),
                      latency_s=round(float(retrieval.latency_s), 3), backbone=self.backbone.name,
                      model=self.backbone.model, n_agents=self.n_agents, t_max=self.t_max)


def _arguments(raw) -> str:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return str(raw)
    if isinstance(value, dict):
        return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in value.items())
    return json.dumps(value, ensure_ascii=False)


def _ask_tool(asker: Asker):
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool

    async def ask(question: str, top: int = asker.top) -> Answer:
        try:
            return await asker(question, top=max(1, int(top)))
        except (ValueError, RuntimeError) as e:
            raise ToolError(" ".join(str(e).split())) from None

    description = (f"Answer a question with the ARK retrieval agent: {asker.n_agents} agent(s) of "
                   f"{asker.backbone.name} ({asker.backbone.model}) explore the graph with its tools for at most "
                   f"{asker.t_max} steps each; their selections are fused by votes. Returns the ranked nodes "
                   "(ids as the graph tools show them), each agent's calls and stop reason, and the cost.")
    return Tool.from_function(ask, name="ask", description=description, structured_output=True)


# ------------------------------------------------------------------------------ the server
def build_server(tools, name: str = "ark", asker: Asker | None = None, verbose: bool = False):
    """An ``MCPServer`` exposing every tool of ``tools`` (a `ToolSet`), the ``ark://graph`` resource and,
    with ``asker``, the ask tool; run it with `serve`. The SDK's and uvicorn's info lines (one per
    request) only with ``verbose``; their warnings always."""
    from mcp.server.mcpserver import MCPServer

    graph = tools.graph
    id_note = ("the graph's own ids" if tools.ids.user else "their ids") + " in brackets"
    instructions = (f"Tools over the knowledge graph {graph.name!r} ({graph.num_nodes:,} nodes of types "
                    f"{', '.join(graph.node_type_names)}; relations {', '.join(graph.relation_names)}; read "
                    f"{GRAPH_URI} for counts, the relation schema and the id format). Start with search_graph, "
                    f"then follow relations with explore_neighbors using the nodes' {id_note}."
                    + (" ask runs the whole ARK agent on one question." if asker is not None else ""))
    served = [_tool(tools, s) for s in tools.openai_tools()] + ([_ask_tool(asker)] if asker is not None else [])
    server = MCPServer(name, instructions=instructions, tools=served, log_level="INFO" if verbose else "WARNING")
    described: dict[str, str] = {}

    @server.resource(GRAPH_URI, name="graph", mime_type="application/json",
                     description=f"The graph {graph.name!r}: node types, relations and their counts, the "
                                 "typed relation schema, the id format, the tools served")
    def graph_resource() -> str:
        if "text" not in described:   # computed once (the schema reads every stored edge), then shared
            described["text"] = json.dumps(describe_graph(tools, ask=asker is not None), indent=1,
                                           ensure_ascii=False)
        return described["text"]

    return server


def parse_http(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; ``:PORT`` listens on 127.0.0.1) -> (host, port); ValueError
    in one line naming the value."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"--http takes HOST:PORT with a port from 1 to 65535 (e.g. 127.0.0.1:8765), got {text!r}")
    return host, int(port)


def check_listen(host: str, port: int) -> None:
    """Fail in one line, before the graph is loaded, when ``host:port`` cannot be listened on."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ValueError(f"--http {host}:{port}: unknown host {host!r} ({e.strerror})") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as e:
            raise ValueError(f"--http {host}:{port}: cannot listen there ({e.strerror})") from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is only this machine's loopback."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addrs = {i[4][0] for i in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except socket.gaierror:
        return False
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def bearer_token(host: str, environ=os.environ) -> tuple[str | None, bool]:
    """(the token requests must carry, whether it was made here): `TOKEN_ENV`'s when set, else a new one
    beyond loopback; (None, False) on loopback without `TOKEN_ENV` (no token asked for)."""
    given = environ.get(TOKEN_ENV)
    if given is not None:
        if len(given.strip()) < MIN_TOKEN_CHARS:
            raise ValueError(f"{TOKEN_ENV} is too short: use at least {MIN_TOKEN_CHARS} characters "
                             "(python -c 'import secrets; print(secrets.token_urlsafe(32))' makes one)")
        return given.strip(), False
    if is_loopback(host):
        return None, False
    return secrets.token_urlsafe(32), True


class Guard:
    """ASGI middleware in front of the SDK's HTTP app: a request without ``Authorization: Bearer <token>``
    gets 401, one whose ``Origin`` is not in ``origins`` 403; neither reaches the server."""

    def __init__(self, app, token: str, origins: Sequence[str] = ()):
        self.app, self.origins = app, {o.rstrip("/") for o in origins}
        self._want = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
            origin = headers.get("origin")
            if origin is not None and origin.decode("latin-1").rstrip("/") not in self.origins:
                return await _refuse(send, 403, "origin not allowed (ark mcp --allow-origin)")
            if not hmac.compare_digest(headers.get("authorization", b""), self._want):
                return await _refuse(send, 401, "a bearer token is required (Authorization: Bearer ...)",
                                     [(b"www-authenticate", b"Bearer")])
        await self.app(scope, receive, send)


async def _refuse(send, status: int, text: str, extra: list | None = None) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


def serve(server, http: tuple[str, int] | None = None, token: str | None = None,
          origins: Sequence[str] = ()) -> None:
    """Run ``server`` on stdio, or on streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted; with
    ``token``, behind `Guard` (the token and ``origins`` checked on every request)."""
    if http is None:
        server.run("stdio")
        return
    host, port = http
    if token is None:
        server.run("streamable-http", host=host, port=port, streamable_http_path=HTTP_PATH)
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    uvicorn.run(Guard(app, token, origins), host=host, port=port, log_level=server.settings.log_level.lower())
