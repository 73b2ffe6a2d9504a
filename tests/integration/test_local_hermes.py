"""Integration tier: a student's chat format served for real (llama-cpp-python's server, SmolLM2-135M GGUF,
chat formats ark-hermes-compact and ark-hermes), started from a backbone config's ``local`` block and asked
through `LLMClient`: the prompt the server completes is `ark.llm.hermes.render` of the request, token for
token, and the Hermes block the model writes (opened for it by a named tool choice: the untrained model
writes none of its own) comes back as a structured tool call.

    .venv/bin/pytest -m integration tests/integration/test_local_hermes.py -s
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ark.llm import hermes
from ark.llm.client import BackboneConfig, LLMClient
from ark.llm.llama_server import HERMES_FORMATS, PROMPT_LOG_ENV, serving_revision
from ark.llm.local_server import default_gguf, free_port, serving

pytestmark = pytest.mark.integration

TOOLS = [
    {"type": "function", "function": {
        "name": "search_graph", "description": "Full-text search over all nodes of the knowledge graph.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}},
                       "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "explore_neighbors", "description": "List the neighbors of a node.",
        "parameters": {"type": "object", "properties": {"node_id": {"type": "integer"}}, "required": ["node_id"]}}},
]


def _call(name: str, arguments: str, id_: str) -> dict:
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


# a trajectory in the student's format: two calls answered, then the model's turn
MESSAGES = [
    {"role": "system", "content": "You find nodes in a knowledge graph by calling tools. Quote \"names\" exactly."},
    {"role": "user", "content": "Which genes are associated with gout?"},
    {"role": "assistant", "content": "", "tool_calls": [
        _call("search_graph", '{"query": "gout"}', "c1"), _call("search_graph", '{"query": "uric acid"}', "c2")]},
    {"role": "tool", "tool_call_id": "c1", "content": "[12] disease \"gout\"\n[40] disease \"gouty arthritis\""},
    {"role": "tool", "tool_call_id": "c2", "content": "[77] gene/protein SLC2A9 <urate transporter>"},
    {"role": "assistant", "content": "", "tool_calls": [_call("explore_neighbors", '{"node_id": 12}', "c3")]},
    {"role": "tool", "tool_call_id": "c3", "content": "[77] gene/protein SLC2A9\n[78] gene/protein ABCG2"},
    {"role": "user", "content": "Search for ABCG2 now."},
]


@pytest.fixture(scope="module", params=["ark-hermes-compact", "ark-hermes"])
def served(request, tmp_path_factory):
    """The server `serving` starts for a local backbone whose local block names the chat format, with every
    prompt it completes logged (`PROMPT_LOG_ENV`)."""
    prompts = tmp_path_factory.mktemp("hermes") / "prompts.jsonl"
    mp = pytest.MonkeyPatch()
    mp.setenv(PROMPT_LOG_ENV, str(prompts))      # the server process inherits it
    backbone = BackboneConfig(name="local", model=default_gguf().name.removesuffix(".gguf"), provider="local",
                              base_url=f"http://127.0.0.1:{free_port()}/v1", timeout_s=300.0, max_retries=0,
                              max_tokens=64, local={"chat_format": request.param})
    try:
        with serving(backbone) as server:
            assert server is not None and server.config.chat_format == request.param
            assert backbone.serving == serving_revision(request.param)
            yield backbone, prompts, HERMES_FORMATS[request.param], server
    finally:
        mp.undo()


def _ask(backbone, **kw):
    async def go():
        client = LLMClient(backbone)
        try:
            return await client.chat(MESSAGES, TOOLS, **kw)
        finally:
            await client.aclose()
    return asyncio.run(go())


def _last_logged(prompts) -> dict:
    return json.loads(prompts.read_text().splitlines()[-1])


@pytest.fixture(scope="module")
def vocab():
    from llama_cpp import Llama

    return Llama(model_path=str(default_gguf()), vocab_only=True, verbose=False)


def test_the_server_completes_the_rendered_prompt(served, vocab):
    backbone, prompts, template, _ = served
    resp = _ask(backbone)
    seen = _last_logged(prompts)
    rendered = hermes.render(MESSAGES, TOOLS, template=template)
    assert seen["prompt"] == rendered and seen["prefix"] == ""
    # and the model was given exactly those tokens: special tokens parsed, no BOS added (as in training)
    assert resp.prompt_tokens == len(vocab.tokenize(rendered.encode(), add_bos=False, special=True))
    print(f"\nprompt {resp.prompt_tokens} tokens; the model wrote {seen['text']!r}")
    reply = hermes.parse_tool_calls(seen["text"])   # the untrained model writes no call here: its text comes back
    assert (resp.content or "") == reply.content
    assert [(tc.name, tc.arguments) for tc in resp.tool_calls] == \
        [(c["function"]["name"], c["function"]["arguments"]) for c in reply.tool_calls]


def test_a_named_tool_choice_opens_the_call_and_it_comes_back_structured(served, vocab):
    backbone, prompts, template, server = served
    resp = _ask(backbone, tool_choice={"type": "function", "function": {"name": "search_graph"}})
    seen = _last_logged(prompts)
    rendered = hermes.render(MESSAGES, TOOLS, template=template)
    assert seen["prompt"] == rendered
    assert seen["prefix"] == '<tool_call>\n{"name": "search_graph", "arguments":'
    assert resp.prompt_tokens == len(vocab.tokenize((rendered + seen["prefix"]).encode(), add_bos=False, special=True))
    print(f"\nthe model wrote {seen['text']!r}")
    expected = hermes.parse_tool_calls(seen["text"])
    assert [c["function"]["name"] for c in expected.tool_calls] == ["search_graph"]
    assert [(tc.name, tc.arguments) for tc in resp.tool_calls] == \
        [(c["function"]["name"], c["function"]["arguments"]) for c in expected.tool_calls]
    assert isinstance(json.loads(resp.tool_calls[0].arguments)["query"], str)   # under the tool's schema
    assert resp.finish_reason == "tool_calls" and "<tool_call>" not in (resp.content or "")
    # the completions went through Llama.create_completion's RAM prompt cache (the server's --cache)
    assert server.log_path.read_text(errors="replace").count("Llama._create_completion: cache save") >= 2
