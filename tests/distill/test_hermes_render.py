"""`ark.llm.hermes.render` (what the local server's ark-hermes formats send to the model) against
transformers' `apply_chat_template` with the same template (what the student is trained on)."""

from __future__ import annotations

import copy

import pytest

from ark.distill.student import CHAT_TEMPLATES, StudentConfig, training_chat_template
from ark.llm import hermes
from ark.tools import ToolConfig, ToolSet
from tests.helpers.toy_graph import graph, index  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.distill


def _trajectory(tools: list[dict]) -> list[dict]:
    search, neighbors = (t["function"]["name"] for t in tools[:2])
    return [
        {"role": "system", "content": "Answer with node ids. Quote \"exactly\" & keep <tags>."},
        {"role": "user", "content": "Which genes are linked to Ehlers–Danlos syndrome (type IV)?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": search, "arguments": {"query": "Ehlers–Danlos <IV>"}}},
            {"id": "c2", "type": "function", "function": {"name": neighbors, "arguments": '{"node_id": 3}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '[3] disease "Ehlers–Danlos syndrome" <vascular>'},
        {"role": "tool", "tool_call_id": "c2", "content": "[7] gene/protein COL3A1\n[8] gene/protein TNXB"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "select", "arguments": '{"node_ids": [7]}'}}]},
        {"role": "tool", "tool_call_id": "c3", "content": "selected [7]"},
        {"role": "assistant", "content": "COL3A1 is the answer."},
    ]


@pytest.mark.parametrize("choice", [c for c in CHAT_TEMPLATES if c != "native"])
def test_render_is_transformers_apply_chat_template(student_tokenizer, graph, index, choice):  # noqa: F811
    tools = ToolSet(graph, index, ToolConfig()).openai_tools()
    tok = copy.deepcopy(student_tokenizer)
    template = training_chat_template(tok, choice)
    tok.chat_template = template
    kw = StudentConfig.smollm2().render_kwargs()   # what training passes (enable_thinking)
    messages = _trajectory(tools)
    for upto, generation_prompt in ((len(messages), False), (5, True), (2, True)):
        theirs = tok.apply_chat_template(messages[:upto], tools=tools, tokenize=False,
                                         add_generation_prompt=generation_prompt, **kw)
        ours = hermes.render(messages[:upto], tools, template=template, add_generation_prompt=generation_prompt)
        assert ours == theirs


def test_compact_tool_list_saves_tokens(student_tokenizer, graph, index):  # noqa: F811
    tools = ToolSet(graph, index, ToolConfig()).openai_tools()
    messages = _trajectory(tools)[:2]
    full = hermes.render(messages, tools, template=hermes.CHATML_TOOLS_TEMPLATE)
    compact = hermes.render(messages, tools, template=hermes.CHATML_TOOLS_COMPACT_TEMPLATE)
    n_full, n_compact = (len(student_tokenizer(t, add_special_tokens=False)["input_ids"]) for t in (full, compact))
    print(f"\nSmolLM2 tokens of the first prompt: full tool schemas {n_full}, compact {n_compact}")
    assert n_compact < n_full
