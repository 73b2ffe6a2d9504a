"""Scripted agent policies for the scripted OpenAI-compatible server (`tests.helpers.scripted_server`):
each maps a chat request to the reply a model following that policy would send.

    ScriptedServer(responder=search_select_finish)
"""

from __future__ import annotations

import re


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


def ark_like(request: dict):
    """Scripted policy shaped like a GPT-4.1 ARK trajectory, replying with realistic token counts
    (`tests.helpers.scripted_server.with_usage`): a search of the question, then searches of parts of
    it and explorations of the nodes shown, then a selection and finish. How many steps an agent takes
    (2 to 12, most between 3 and 7) depends on the question and the agent's seed, as a model's choices
    would; every prompt carries the observations gathered so far, so it grows step by step."""
    import hashlib

    from tests.helpers.scripted_server import first_user_message, tool_reply, with_usage

    msgs = request["messages"]
    step = sum(m["role"] == "assistant" for m in msgs)
    question = first_user_message(request) or ""
    words = [w for w in re.findall(r"[A-Za-z0-9][\w-]*", question) if len(w) > 3] or [question]
    digest = hashlib.sha256(f"{question}|{request.get('seed')}".encode()).digest()
    steps = 2 + min(digest[0] % 6, digest[1] % 6) + digest[2] % 3 + (digest[3] % 16 == 0) * 4
    tools = [m["content"] for m in msgs if m["role"] == "tool"]
    shown = [int(x) for t in tools for x in re.findall(r"^\[(\d+)\]", t, re.M)]
    if step == 0:
        reply = tool_reply(("search_graph", {"query": question, "k": 5}))
    elif step >= steps - 1 or not shown:
        reply = tool_reply(("select", {"node_ids": list(dict.fromkeys(shown))[:8]}), ("finish", {}))
    elif step % 2 == 1:
        node = shown[(digest[4 + step] % len(shown))]
        reply = tool_reply(("explore_neighbors", {"node_id": node, "query": " ".join(words[step % len(words):][:3])}))
    else:
        start = digest[4 + step] % len(words)
        reply = tool_reply(("search_graph", {"query": " ".join(words[start:start + 4]), "k": 5}))
    return with_usage(request, reply)
