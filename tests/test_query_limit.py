"""A query longer than `QUERY_MAX_CHARS` (ark.tools.arguments) is refused by the tool itself, before any
tokenizing or scoring, with the same one line in a ToolSet call, in ``ark search`` and over MCP stdio
(whose server then goes on answering). Each MCP exchange runs under a wall-time guard (a hang fails)."""

from __future__ import annotations

import os
import sys

import anyio
import pytest

from ark.cli.main import main
from ark.tools import NEIGHBORS, SEARCH
from ark.tools.arguments import QUERY_MAX_CHARS
from tests.test_mcp import ENV, KG, REPO, agent_tools, backbone, mcp_args  # noqa: F401  (fixtures)

HUGE = "agents " * 1_500_000          # 10.5 MB, as the audit sent it


def limit_line(n: int) -> str:
    return f"query is {n:,} characters long; the limit is {QUERY_MAX_CHARS:,} characters: send a few keywords"


@pytest.mark.parametrize("tool", [SEARCH, NEIGHBORS])
def test_the_tool_refuses_a_query_past_the_limit_and_takes_one_at_it(agent_tools, tool):   # noqa: F811
    args = {"node_id": agent_tools.ids.show(0)} if tool == NEIGHBORS else {}
    over = agent_tools.call(tool, {**args, "query": "x" * (QUERY_MAX_CHARS + 1)})
    assert over.error and over.observation == f"Error: {limit_line(QUERY_MAX_CHARS + 1)}."
    huge = agent_tools.call(tool, {**args, "query": HUGE})
    assert huge.error and huge.observation == f"Error: {limit_line(len(HUGE))}."
    at = agent_tools.call(tool, {**args, "query": ("agents " * QUERY_MAX_CHARS)[:QUERY_MAX_CHARS]})
    assert not at.error


def test_ark_search_refuses_it_in_one_line(tmp_path, capsys):
    code = main(["search", HUGE, "--graph", str(KG), "--root", str(tmp_path / "data")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err == f"Error: {limit_line(len(HUGE))}.\n"


@pytest.mark.commands   # an MCP server process over stdio
def test_mcp_over_stdio_refuses_it_and_goes_on(tmp_path, backbone):   # noqa: F811
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "ark", *mcp_args(tmp_path / "data", backbone)],
                                   env=ENV, cwd=str(REPO))
    got = {}

    async def run():
        with anyio.fail_after(120):                       # the guard: a server stuck on the query fails
            async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    got["huge"] = await s.call_tool(SEARCH, {"query": HUGE})
                    got["after"] = await s.call_tool(SEARCH, {"query": "agents"})

    anyio.run(run)
    assert got["huge"].is_error and limit_line(len(HUGE)) in got["huge"].content[0].text
    assert "\n" not in got["huge"].content[0].text
    assert not got["after"].is_error and got["after"].content[0].text.startswith('search_graph query="agents"')
