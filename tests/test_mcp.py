"""``ark mcp`` through the MCP SDK's own clients, over stdio and over streamable HTTP: the agent's tools with
the graph's own ids in and out, the ``ark://graph`` resource, ``ask`` (ARK with the scripted backbone),
16 concurrent calls, bad calls, a call cancelled and a client gone mid-call while the server keeps
answering; bad ``--http`` values stop in one line before the graph is loaded."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from ark.cli.main import main
from ark.data.tables.source import TablesSource
from ark.search.bm25 import load_index
from ark.tools import NEIGHBORS, SEARCH, ToolConfig, ToolSet
from tests.helpers.policies import search_select_finish
from tests.helpers.scripted_server import ScriptedServer, first_user_message, server_error, slow

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
QUESTION = "Which SIGIR paper revisits BM25 sparse retrieval for question answering?"
SLOW_S = 4.0   # how long the scripted backbone takes to answer a question that says "slowly"


@pytest.fixture(scope="module")
def agent_tools(tmp_path_factory):
    """The tools exactly as a run builds them for this graph."""
    source = TablesSource(KG, root=tmp_path_factory.mktemp("data"))
    graph = source.graph()
    return ToolSet(graph, load_index(graph, source.cache_dir), ToolConfig())


def backbone_policy(request: dict):
    """search, select what it showed, finish; slowly for a question saying "slowly"; HTTP 500 for "fail"."""
    question = first_user_message(request) or ""
    if "fail" in question:
        return server_error(500)
    reply = search_select_finish(request)
    return slow(reply, SLOW_S) if "slowly" in question else reply


@pytest.fixture(scope="module")
def backbone():
    with ScriptedServer(responder=backbone_policy) as server:
        yield server


def mcp_args(root, backbone) -> list[str]:
    return ["mcp", "--graph", str(KG), "--root", str(root), "--backbone", "scripted", "--base-url",
            backbone.base_url, "--no-cache", "--n-agents", "2", "--t-max", "5"]


def expected_answer(agent_tools) -> dict:
    """What ask must return for QUESTION under backbone_policy: both agents select the search's five hits
    in order, so the fused list is those hits with 2 votes each."""
    hits = agent_tools.call(SEARCH, {"query": QUESTION, "k": 5}).node_ids
    ids = agent_tools.ids
    return {"ranking": [{"rank": r, "id": ids.show(i), "internal_id": i, "votes": 2} for r, i in enumerate(hits, 1)],
            "selected": [ids.show(i) for i in hits]}


def check_answer(result, agent_tools) -> dict:
    assert not result.is_error, result.content[0].text
    answer = result.structured_content
    assert json.loads(result.content[0].text) == answer                  # the same answer as JSON text
    want = expected_answer(agent_tools)
    assert [{k: n[k] for k in ("rank", "id", "internal_id", "votes")} for n in answer["ranking"]] == want["ranking"]
    assert answer["ranking"][0]["id"] == node_id("Sparse Retrieval Revisited")
    assert answer["ranking"][0]["name"] == "Sparse Retrieval Revisited"
    assert answer["status"] == "ok" and (answer["n_agents"], answer["t_max"], answer["backbone"]) == (2, 5, "scripted")
    for agent in answer["agents"]:
        assert agent["stop_reason"] == "finish" and agent["steps"] == 2 and agent["selected"] == want["selected"]
        assert agent["calls"][0] == f"search_graph(query={json.dumps(QUESTION)}, k=5)"
        assert agent["calls"][1] == f"select(node_ids={json.dumps(want['selected'])})" and agent["calls"][2] == "finish()"
    # the scripted backbone bills 10 prompt and 5 completion tokens per reply: 2 agents x 2 replies
    assert answer["cost"] == {"prompt_tokens": 40, "completion_tokens": 20, "usd": 0.0}
    return answer


def node_id(name: str) -> str:
    """The id column of the node named ``name``, read from the nodes file itself."""
    return next(line.split(",")[0] for line in (KG / "nodes.csv").read_text().splitlines()
                if line.split(",")[2] == name)


def check_resource(text: str, agent_tools) -> None:
    """The graph's description, checked against the table files themselves."""
    info = json.loads(text)
    nodes = [line.split(",")[:2] for line in (KG / "nodes.csv").read_text().splitlines()[1:]]
    edges = [json.loads(line) for line in (KG / "edges.jsonl").read_text().splitlines() if line.strip()]
    assert (info["name"], info["nodes"], info["edges"]) == ("tables_kg", len(nodes), len(edges))
    types = {}
    for _, t in nodes:
        types[t] = types.get(t, 0) + 1
    assert info["node_types"] == types
    kind = dict(nodes)
    triples = {}
    for e in edges:
        key = (kind[e["src"]], e["relation"], kind[e["dst"]])
        triples[key] = triples.get(key, 0) + 1
    assert {(r["source_type"], r["relation"], r["target_type"]): r["edges"] for r in info["schema"]} == triples
    assert info["relations"] == {r: sum(1 for e in edges if e["relation"] == r) for r in info["relations"]}
    assert info["ids"]["space"] == "user" and info["ids"]["json_type"] == "string"
    assert info["ids"]["examples"] == [n[0] for n in nodes[:3]]
    assert info["tools"] == [SEARCH, NEIGHBORS, "ask"]


async def session_checks(s, agent_tools, got: dict) -> None:
    """What every transport must do: tools, resource, user ids in and out, ask, bad calls."""
    await s.initialize()
    got["tools"] = (await s.list_tools()).tools
    got["resources"] = (await s.list_resources()).resources
    got["graph"] = (await s.read_resource("ark://graph")).contents[0].text
    got["search"] = await s.call_tool(SEARCH, {"query": "rare disease phenotypes", "k": 3})
    got["neighbors"] = await s.call_tool(NEIGHBORS, {"node_id": "A2", "query": "tools"})
    got["bad"] = [await s.call_tool(NEIGHBORS, a) for a in
                  ({"node_id": 4}, {"node_id": "P1", "node_types": ["book"]}, {"query": "x"},
                   {"node_id": "P1", "bogus": 1})]
    got["bad"].append(await s.call_tool(SEARCH, {"query": "agents", "top": 3, "kk": 1}))
    got["unknown"] = await s.call_tool("delete_graph", {})
    got["ask"] = await s.call_tool("ask", {"question": QUESTION})
    got["ask_failed"] = await s.call_tool("ask", {"question": "fail: which paper?"})
    got["ask_empty"] = await s.call_tool("ask", {"question": "  "})


def check_session(got: dict, agent_tools) -> None:
    tools = {t.name: t for t in got["tools"]}
    specs = {t["function"]["name"]: t["function"] for t in agent_tools.openai_tools()}
    assert set(tools) == set(specs) | {"ask"} and set(specs) == {SEARCH, NEIGHBORS}
    for name, spec in specs.items():   # the agent's own schemas and descriptions, ids as strings
        assert tools[name].input_schema == spec["parameters"] and tools[name].description == spec["description"]
    assert tools[NEIGHBORS].input_schema["properties"]["node_id"]["type"] == "string"
    assert tools["ask"].input_schema["required"] == ["question"]
    assert [r.uri for r in got["resources"]] == ["ark://graph"] and got["resources"][0].mime_type == "application/json"
    check_resource(got["graph"], agent_tools)
    assert got["search"].content[0].text == agent_tools.call(SEARCH, {"query": "rare disease phenotypes", "k": 3}).observation
    top = got["search"].content[0].text.splitlines()[1]                           # the graph's own ids out
    assert top.startswith(f"[{node_id('rare disease')}] rare disease (topic)")
    assert got["neighbors"].content[0].text == agent_tools.call(NEIGHBORS, {"node_id": "A2", "query": "tools"}).observation
    assert got["neighbors"].content[0].text.startswith("explore_neighbors node_id=A2 (Tomas Okafor, author)")
    texts = [r.content[0].text for r in got["bad"]]
    assert all(r.is_error for r in got["bad"]) and all("\n" not in t for t in texts)      # one line each
    assert texts[0] == ("Error executing tool explore_neighbors: node_id 4 is not the id of a node of this graph; "
                        "use an id shown in brackets in an earlier result.")
    assert 'node_types names the unknown node type "book"; use only these node types: "paper"' in texts[1]
    assert "explore_neighbors needs the argument node_id" in texts[2]
    assert texts[3] == ("Error executing tool explore_neighbors: explore_neighbors has no argument \"bogus\"; "
                        "its arguments are: node_id, query, node_types, relations, k.")
    assert texts[4] == ("Error executing tool search_graph: search_graph has no argument \"top\", \"kk\"; "
                        "its arguments are: query, k, node_types.")
    assert got["unknown"].is_error and "delete_graph" in got["unknown"].content[0].text
    check_answer(got["ask"], agent_tools)
    failed = got["ask_failed"]
    assert failed.is_error and failed.content[0].text.startswith("Error executing tool ask: all 2 agents failed: agent 0: ")
    assert "\n" not in failed.content[0].text
    assert got["ask_empty"].is_error and "question is empty" in got["ask_empty"].content[0].text


SEARCHES = [f"{w} retrieval" for w in ("sparse", "dense", "graph", "agents", "drug", "protein", "benchmark", "fusion",
                                       "ranking", "embedding", "tools", "language", "disease", "question", "link", "expansion")]


def expected_searches(agent_tools) -> list[str]:
    return [agent_tools.call(SEARCH, {"query": q, "k": 4}).observation for q in SEARCHES]


# --- stdio ---------------------------------------------------------------------------------------------
@pytest.mark.commands
def test_mcp_over_stdio(tmp_path, agent_tools, backbone):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "ark", *mcp_args(tmp_path / "data", backbone)],
                                   env=ENV, cwd=str(REPO))
    got: dict = {}

    async def run():
        async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
            async with ClientSession(read, write) as s:
                await session_checks(s, agent_tools, got)
                results = [None] * len(SEARCHES)

                async def one(i):
                    results[i] = await s.call_tool(SEARCH, {"query": SEARCHES[i], "k": 4})

                async with anyio.create_task_group() as tg:   # 16 calls in flight at once
                    for i in range(len(SEARCHES)):
                        tg.start_soon(one, i)
                got["concurrent"] = results
                with anyio.move_on_after(1.0) as scope:        # a call given up mid-way
                    await s.call_tool("ask", {"question": f"slowly: {QUESTION}"})
                got["cancelled"] = scope.cancelled_caught
                got["after"] = await s.call_tool(SEARCH, {"query": "agents"})      # still serving

    anyio.run(run)
    check_session(got, agent_tools)
    assert [r.content[0].text for r in got["concurrent"]] == expected_searches(agent_tools)
    assert got["cancelled"] and any("slowly" in (first_user_message(r) or "") for r in backbone.requests)
    assert not got["after"].is_error and got["after"].content[0].text.startswith('search_graph query="agents"')


# --- streamable HTTP -----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _started(proc, port: int) -> None:
    """Wait until ``ark mcp`` listens on ``port``; its error output if it exited first."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ark mcp exited: {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("ark mcp did not listen within 120 s")


@pytest.fixture()
def http_server(tmp_path, backbone):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ark", *mcp_args(tmp_path / "data", backbone),
                             "--http", f"127.0.0.1:{port}"], env=ENV, cwd=str(REPO),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _started(proc, port)
    try:
        yield proc, f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.commands
def test_mcp_over_streamable_http(http_server, agent_tools, backbone):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    proc, url = http_server
    got: dict = {}

    async def client(check):
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as s:
                return await check(s)

    async def search(i, s):
        await s.initialize()
        return await s.call_tool(SEARCH, {"query": SEARCHES[i], "k": 4})

    async def ask(s):
        await s.initialize()
        return await s.call_tool("ask", {"question": QUESTION})

    async def gone_mid_call():
        """A client that drops its connection while ask is running (no session DELETE)."""
        with anyio.move_on_after(1.0) as scope:
            async with streamable_http_client(url, terminate_on_close=False) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    await s.call_tool("ask", {"question": f"slowly, over HTTP: {QUESTION}"})
        return scope.cancelled_caught

    async def run():
        got["session"] = {}
        await client(lambda s: session_checks(s, agent_tools, got["session"]))
        results = [None] * len(SEARCHES)

        async def one(i):
            results[i] = await client(lambda s: search(i, s))

        async with anyio.create_task_group() as tg:      # 16 clients, each its own session, at once
            for i in range(len(SEARCHES)):
                tg.start_soon(one, i)
        got["concurrent"] = results
        got["gone"] = await gone_mid_call()
        got["after"] = await client(lambda s: search(0, s))
        got["ask_after"] = await client(ask)

    anyio.run(run)
    check_session(got["session"], agent_tools)
    assert [r.content[0].text for r in got["concurrent"]] == expected_searches(agent_tools)
    assert got["gone"] and any("over HTTP" in (first_user_message(r) or "") for r in backbone.requests)
    assert proc.poll() is None                                            # the server survived
    assert got["after"].content[0].text == expected_searches(agent_tools)[0]
    check_answer(got["ask_after"], agent_tools)


# --- bad values: one line, before the graph is loaded ----------------------------------------------------
@pytest.mark.parametrize("http,message", [
    ("8765", "--http takes HOST:PORT with a port from 1 to 65535 (e.g. 127.0.0.1:8765), got '8765'"),
    ("127.0.0.1:99999", "--http takes HOST:PORT with a port from 1 to 65535 (e.g. 127.0.0.1:8765), got '127.0.0.1:99999'"),
    ("no-such-host.invalid:8765", "--http no-such-host.invalid:8765: unknown host 'no-such-host.invalid'"),
])
def test_bad_http_values_are_one_line(tmp_path, capsys, http, message):
    root = tmp_path / "data"
    assert main(["mcp", "--graph", str(KG), "--root", str(root), "--http", http]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ark mcp: error: {message}") and err.count("\n") == 1
    assert not root.exists()                                            # nothing built or written


def test_a_port_in_use_and_a_stray_base_url_are_one_line(tmp_path, capsys):
    root = tmp_path / "data"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["mcp", "--graph", str(KG), "--root", str(root), "--http", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert err == f"ark mcp: error: --http 127.0.0.1:{port}: cannot listen there (Address already in use)\n"
    assert main(["mcp", "--graph", str(KG), "--root", str(root), "--base-url", "http://x/v1"]) == 2
    assert capsys.readouterr().err == ("ark mcp: error: --base-url and --model set the ask tool's backbone; "
                                       "give it with --backbone NAME\n")
    assert main(["mcp", "--graph", str(KG), "--root", str(root), "--backbone", "gpt-5"]) == 2
    assert capsys.readouterr().err.startswith("ark mcp: error: unknown backbone 'gpt-5'; valid backbones: ")
    assert not root.exists()


# --- who may call, and what ask may spend --------------------------------------------------------------
def _stop(proc) -> str:
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


@pytest.mark.commands   # an MCP server process over HTTP, like the other served ones there
@pytest.mark.parametrize("given", [True, False])
def test_beyond_loopback_every_request_needs_the_token_and_an_allowed_origin(tmp_path, agent_tools, backbone,
                                                                               given):
    """``--http 0.0.0.0:PORT``: without the bearer token (ARK_MCP_TOKEN, or the one printed once on stderr)
    or from a foreign Origin a request is refused before it reaches a tool; with it, the SDK's client is
    served as on loopback."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
    env = {k: v for k, v in ENV.items() if k != "ARK_MCP_TOKEN"}
    if given:
        env["ARK_MCP_TOKEN"] = "a-token-of-the-operators-choosing"
    allowed = [] if given else ["--allow-origin", "https://app.example.org"]   # none allowed by default
    proc = subprocess.Popen([sys.executable, "-m", "ark", *mcp_args(tmp_path / "data", backbone),
                             "--http", f"0.0.0.0:{port}", *allowed],
                            env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    plain = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    try:
        _started(proc, port)
        token = env.get("ARK_MCP_TOKEN")
        if token is None:   # made at start and printed once: read it from stderr
            line = ""
            while "the token" not in line:
                line = proc.stderr.readline()
                assert line, "no token printed"
            token = line.rsplit(": ", 1)[1].strip()
            assert len(token) >= 16
        with httpx2.Client(timeout=30) as h:
            refused = {
                "no token": h.post(url, json=init, headers=plain).status_code,
                "wrong token": h.post(url, json=init, headers={**plain, "authorization": "Bearer nope"}).status_code,
                "foreign origin and host": h.post(url, json=init, headers={
                    **plain, "authorization": f"Bearer {token}", "origin": "http://evil.example",
                    "host": "evil.example"}).status_code}
        assert refused == {"no token": 401, "wrong token": 401, "foreign origin and host": 403}

        async def call(headers):
            async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as s:
                        await s.initialize()
                        return await s.call_tool(SEARCH, {"query": SEARCHES[0], "k": 4})

        origin = {} if given else {"origin": "https://app.example.org"}   # a client without a browser's Origin
        result = anyio.run(call, {"authorization": f"Bearer {token}", **origin})
        assert result.content[0].text == expected_searches(agent_tools)[0]
    finally:
        err = _stop(proc)
    if given:   # the operator's token is never printed; a token made at start is printed once (read above)
        assert "a-token-of-the-operators-choosing" not in err and "the token (set ARK_MCP_TOKEN" not in err
    else:
        assert token not in err


@pytest.mark.commands   # an MCP server process over stdio, asked until its cap
def test_ask_spends_under_its_own_cap_and_then_refuses_in_one_line(tmp_path, monkeypatch):
    """``--ask-max-usd``: asks of a paid backbone (gpt-4.1 prices, the scripted server billing realistic
    usage) are answered with what ask has paid so far until the cap is reached; then each ask is refused in
    one line and no further call is billed; what was billed stays within the cap."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from ark.cost.prices import PRICES
    from tests.helpers.scripted_server import with_usage

    cap = 0.05
    with ScriptedServer(responder=lambda r: with_usage(r, search_select_finish(r))) as paid:
        args = ["mcp", "--graph", str(KG), "--root", str(tmp_path / "data"), "--backbone", "gpt-4.1",
                "--base-url", paid.base_url, "--no-cache", "--n-agents", "2", "--t-max", "5", "--ask-max-usd", str(cap)]
        params = StdioServerParameters(command=sys.executable, args=["-m", "ark", *args], cwd=str(REPO),
                                       env={**ENV, "OPENAI_API_KEY": "sk-scripted-" + "0" * 20})
        got = []

        async def run():
            async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    for i in range(20):
                        got.append(await s.call_tool("ask", {"question": f"{QUESTION} ({i})"}))
                        if got[-1].is_error:
                            break
                    before = paid.calls
                    got.append(await s.call_tool("ask", {"question": QUESTION}))
                    got.append(paid.calls - before)

        anyio.run(run)
        price = PRICES["gpt-4.1"]
        billed = sum((r.prompt_tokens * price.input_per_m + r.completion_tokens * price.output_per_m) / 1e6
                     for r in (with_usage(q, search_select_finish(q)) for q in paid.requests))
    *answers, refused, again, calls_after = got
    assert answers and not any(a.is_error for a in answers)
    spent = [a.structured_content["spend"] for a in answers]
    assert all(s["ask_cap_usd"] == cap for s in spent)
    assert 0 < spent[0]["ask_paid_usd"] < spent[-1]["ask_paid_usd"] <= cap   # what ask has paid, as it grows
    for r in (refused, again):
        text = r.content[0].text
        assert r.is_error and text.count("\n") == 0
        assert "ask is refused: its spending cap --ask-max-usd=0.05 is reached (ask has paid $" in text
    assert calls_after == 0            # once reached, no call is made
    assert billed <= cap
