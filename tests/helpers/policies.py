"""Scripted agent policies for the scripted OpenAI-compatible server (`tests.helpers.scripted_server`):
each maps a chat request to the reply a model following that policy would send.

    ScriptedServer(responder=search_select_finish)
"""

from __future__ import annotations

import re


def search_select_finish(request: dict):
    """Scripted policy: search the question, select what the search showed, finish."""
    from tests.helpers.scripted_server import first_user_message, tool_reply

    msgs = request["messages"]
    step = sum(m["role"] == "assistant" for m in msgs)
    if step == 0:
        return tool_reply(("search_graph", {"query": first_user_message(request), "k": 5}))
    if step == 1:
        last = [m for m in msgs if m["role"] == "tool"][-1]["content"]
        ids = [int(x) for x in re.findall(r"^\[(\d+)\]", last, re.M)]
        return tool_reply(("select", {"node_ids": ids}), ("finish", {}))
    return tool_reply(("finish", {}))
