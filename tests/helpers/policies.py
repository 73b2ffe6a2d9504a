"""Scripted agent policies for the scripted OpenAI-compatible server (`tests.helpers.scripted_server`):
each maps a chat request to the reply a model following that policy would send.

    ScriptedServer(responder=search_select_finish)
"""

from __future__ import annotations


def search_select_finish(request: dict):
    """Scripted policy: search the question, select what the search showed, finish."""
    from tests.helpers.scripted_server import first_user_message, shown_ids, tool_reply

    msgs = request["messages"]
    step = sum(m["role"] == "assistant" for m in msgs)
    if step == 0:
        return tool_reply(("search_graph", {"query": first_user_message(request), "k": 5}))
    if step == 1:
        last = [m for m in msgs if m["role"] == "tool"][-1]["content"]
        ids = shown_ids(last)
        return tool_reply(("select", {"node_ids": ids}), ("finish", {}))
    return tool_reply(("finish", {}))


def search_explore_select(request: dict):
    """Scripted policy: search the question, explore the first hit's neighbors for the question,
    select the first hit and the neighbors shown, finish."""
    from tests.helpers.scripted_server import first_user_message, shown_ids, tool_reply

    msgs = request["messages"]
    step = sum(m["role"] == "assistant" for m in msgs)
    tools = [m["content"] for m in msgs if m["role"] == "tool"]
    if step == 0:
        return tool_reply(("search_graph", {"query": first_user_message(request), "k": 5}))
    if step == 1:
        hits = shown_ids(tools[-1])
        if hits:
            return tool_reply(("explore_neighbors", {"node_id": hits[0], "query": first_user_message(request)}))
        return tool_reply(("finish", {}))
    if step == 2:
        ids = shown_ids(tools[0])[:1] + shown_ids(tools[-1])
        return tool_reply(("select", {"node_ids": ids}), ("finish", {}))
    return tool_reply(("finish", {}))
