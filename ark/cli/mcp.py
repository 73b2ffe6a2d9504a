"""ARK's graph tools as a Model Context Protocol server, so any MCP client can explore a graph.

    ark mcp --graph demo                  # stdio transport; e.g. in an MCP client's server list:
    {"command": "ark", "args": ["mcp", "--graph", "path/to/my_kg"]}

Built with the official ``mcp`` SDK's ``MCPServer`` (called FastMCP before mcp 2). Each tool of the
agent's `ark.tools.toolset.ToolSet` becomes one MCP tool with the **same name, description and JSON schema**
(``ToolSet.openai_tools()``), and a call returns the **same observation text** the agent reads
(``ToolSet.call``). Arguments go to ``ToolSet.call`` as the client sent them, so they are checked
and coerced exactly as for the agent (unknown argument names included: they reach ``ToolSet.call``
instead of pydantic); a call the tool rejects (unknown node, unknown type, missing query, unknown
argument) comes back as an MCP tool error (``isError``) carrying the tool's one-line message after the
SDK's ``Error executing tool <name>:``, and the server keeps serving.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import ConfigDict


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


def build_server(tools, name: str = "ark"):
    """An ``MCPServer`` exposing every tool of ``tools`` (a `ToolSet`); run it with ``.run("stdio")``."""
    from mcp.server.mcpserver import MCPServer

    graph = tools.graph
    instructions = (f"Tools over the knowledge graph {graph.name!r} ({graph.num_nodes:,} nodes of types "
                    f"{', '.join(graph.node_type_names)}; relations {', '.join(graph.relation_names)}). "
                    "Start with search_graph, then follow relations with explore_neighbors using the "
                    "node ids in brackets.")
    return MCPServer(name, instructions=instructions, tools=[_tool(tools, s) for s in tools.openai_tools()])
