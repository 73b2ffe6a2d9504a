"""The agent's tools: one module per tool, found by the registry, offered under a switch.

    ark/tools/
      search_graph.py       search_graph: the paper's Search_G(q, k), BM25 (or dense/hybrid) over the whole graph
      explore_neighbors.py  explore_neighbors: the paper's Neighbors(v, q, F), one hop, filtered and ranked
      select.py             select: append shown node ids to the agent's ranked answer list
      finish.py             finish: the answer is final
      find_paths.py         find_paths (beyond the paper, opt-in): the shortest typed paths between two nodes
      registry.py           Tool, Param, the registry (register, all_tools, ...) and its discovery of tool modules
      toolset.py            ToolSet (graph, BM25 index, global search, ToolConfig): what graph tools run against;
                            ToolResult
      arguments.py          ToolInputError and the argument coercion the tools share
      ids.py                NodeIds: the ids the tools show and read (internal 0..N-1, or the graph's own)
      answer.py             AnswerState (answer list, ids shown, finished): what select and finish act on

Each tool module holds everything about its tool: the schema the LLM reads (name, description,
parameters), its prompt entry, its observation texts and its handler ``handler(target, args) ->
ToolResult``, declared as one ``TOOL = Tool(...)``. A ``"graph"`` tool's target is the `ToolSet`, an
``"answer"`` tool's the trajectory's `AnswerState`; the agent calls both the same way.

Adding a tool is one file plus one switch:

1. Write ``ark/tools/count_nodes.py``; the registry imports every module of this package and registers
   its ``TOOL`` (no list to edit)::

       '''count_nodes: how many nodes of one type the graph has.'''
       from ark.tools import Param, Tool, ToolInputError, ToolResult

       def count_nodes(toolset, args):
           names = toolset.graph.node_type_names
           if args["node_type"] not in names:
               raise ToolInputError(f"unknown node type {args['node_type']!r}; use one of {', '.join(names)}")
           tid = toolset.graph.node_type_id(args["node_type"])
           ids = [i for i in range(toolset.graph.num_nodes) if toolset.graph.node_types[i] == tid]
           return ToolResult(f"{len(ids)} nodes of type {args['node_type']}", ids[:5])

       TOOL = Tool("count_nodes", "Count the nodes of one type.",
                   (Param("node_type", {"type": "string"}, "A node type.", required=True),),
                   handler=count_nodes, switch="count_nodes", kind="counting",
                   guide="counts the nodes of one node type.")

2. Its switch is a key of ``ToolConfig.switches`` (or a boolean field of `ToolConfig`): a switch
   nobody set is on, so the tool is offered at once; ``+ablation.tools.switches.count_nodes=false`` on the
   command line or ``switches: {count_nodes: false}`` under ``tools:`` in a ``conf/ablation/`` file
   takes it away (``switch=None``: always offered). ``Tool(..., default_on=False)`` makes a tool opt-in
   instead: off until a config sets its switch (``switches: {find_paths: true}``, as
   ``conf/ablation/paths.yaml`` does for ``find_paths.py``), so the default toolset, its prompt and its run
   statistics stay the paper's. A tool kept outside this package is added with ``register(TOOL)`` or
   ``discover("my_package")``.

From then on the OpenAI tool list, the prompt's tool section (``guide``), the agent's error messages,
the run statistics (a column per graph tool of the default toolset or called in the run), Figure 3's
tool shares (``kind``) and the W&B dashboard carry it; `tests/test_tool_registry.py` follows one such module all the way.

    from ark.tools import ToolConfig, ToolSet
    tools = ToolSet(graph, index, ToolConfig())
    tools.openai_tools(); tools.call("search_graph", {"query": "KCNH2"}).observation
"""

from ark.tools.registry import (ROLES, Param, Tool, all_tools, discover, graph_tool_names, kinds, names,
                                names_of_kind, register, registered, switch_names, unregister)
from ark.tools.toolset import ToolConfig, ToolInputError, ToolResult, ToolSet, default_graph_tool_names
from ark.tools.answer import AnswerState
from ark.tools.ids import NodeIds
from ark.tools.search_graph import NAME as SEARCH
from ark.tools.explore_neighbors import NAME as NEIGHBORS
from ark.tools.explore_neighbors import NeighborRanking, rank_neighbors
from ark.tools.select import NAME as SELECT
from ark.tools.finish import NAME as FINISH

__all__ = ["ROLES", "Param", "Tool", "all_tools", "default_graph_tool_names", "discover", "graph_tool_names", "kinds",
           "names", "names_of_kind", "register", "registered", "switch_names", "unregister", "ToolConfig",
           "ToolInputError", "ToolResult", "ToolSet", "AnswerState", "NodeIds", "SEARCH", "NEIGHBORS", "SELECT",
           "FINISH", "NeighborRanking", "rank_neighbors"]
