"""The prompt llama-cpp-python's chatml-function-calling handler renders, with and without
ark.llm.llama_server's wrapper (the installed library's own handler, no model needed)."""

from __future__ import annotations

import pytest

from ark.llm.llama_server import faithful

pytestmark = pytest.mark.integration

OBSERVATION = '[13355] ENG (gene/protein) "endoglin" <TGF-beta co-receptor>'
MESSAGES = [
    {"role": "system", "content": 'Call "search_graph" first.'},
    {"role": "user", "content": "Which forms of hemangiomatosis are linked to ENG?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "search_graph", "arguments": '{"query": "ENG"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": OBSERVATION},
]
TOOLS = [{"type": "function", "function": {
    "name": "search_graph", "description": "search",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]


class Rendered(Exception):
    pass


class PromptCatcher:
    """Stands in for the model: keeps the first prompt the handler asks to complete, then stops it."""

    verbose = False

    def __init__(self):
        self.prompt = None
        self.max_tokens = "unset"

    def create_completion(self, prompt, **kwargs):
        self.prompt, self.max_tokens = prompt, kwargs.get("max_tokens")
        raise Rendered


def render(handler) -> PromptCatcher:
    llama = PromptCatcher()
    with pytest.raises(Rendered):
        handler(llama=llama, messages=MESSAGES, tools=TOOLS, tool_choice="auto", max_tokens=64)
    return llama


def test_the_library_handler_drops_observations_and_escapes_quotes():
    from llama_cpp.llama_chat_format import get_chat_completion_handler

    seen = render(get_chat_completion_handler("chatml-function-calling"))
    # the fault the wrapper exists for; if a new llama-cpp-python fixes it, revisit ark.llm.llama_server
    assert OBSERVATION not in seen.prompt and "endoglin" not in seen.prompt
    assert "&#34;search_graph&#34;" in seen.prompt
    assert seen.max_tokens is None


def test_the_wrapped_handler_shows_the_observation_verbatim_and_bounds_the_completion():
    from llama_cpp.llama_chat_format import get_chat_completion_handler

    seen = render(faithful(get_chat_completion_handler("chatml-function-calling")))
    assert f"functions.search_graph result:\n{OBSERVATION}<|im_end|>" in seen.prompt
    assert 'Call "search_graph" first.' in seen.prompt and '{"query": "ENG"}' in seen.prompt
    assert "&#34;" not in seen.prompt and "&lt;" not in seen.prompt
    assert seen.max_tokens == 64
