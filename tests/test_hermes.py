"""The Hermes-on-ChatML format (`ark.llm.hermes`) and how a local backbone chooses it: the compact tool
list, tool calls read back from what the template writes, and the `local` block's checks and cache keys.
Equality with transformers' rendering is checked in tests/distill/test_hermes_render.py (transformers is
not in the core environment); the real server in tests/integration/test_local_hermes.py."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from ark.llm import hermes
from ark.llm.client import BackboneConfig, LLMClient
from ark.llm.llama_server import REVISION, serving_revision
from ark.llm.local_server import LocalServer, LocalServerConfig
from ark.llm.transport import TRANSPORTS
from ark.tools import ToolConfig, ToolSet
from tests.helpers.scripted_server import ScriptedServer, text_reply
from tests.helpers.toy_graph import graph, index  # noqa: F401  (shared fixtures)

URL = "http://127.0.0.1:8089/v1"


@pytest.fixture(scope="module")
def tools(graph, index):  # noqa: F811
    return ToolSet(graph, index, ToolConfig()).openai_tools()


def _chat(tools: list[dict]) -> list[dict]:
    search, neighbors = (t["function"]["name"] for t in tools[:2])
    return [
        {"role": "system", "content": "Find the nodes that answer the question."},
        {"role": "user", "content": "Which genes are linked to Marfan syndrome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": search, "arguments": '{"query": "Marfan"}'}},
            {"id": "b", "type": "function", "function": {"name": neighbors, "arguments": '{"node_id": 3}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "[3] disease \"Marfan syndrome\""},
        {"role": "tool", "tool_call_id": "b", "content": "[7] gene/protein FBN1"},
    ]


def _tool_list(prompt: str) -> list[str]:
    return prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].split("\n")


def test_compact_template_lists_each_tool_as_its_name_and_parameters(tools):
    messages = _chat(tools)
    full = hermes.render(messages, tools)
    compact = hermes.render(messages, tools, template=hermes.CHATML_TOOLS_COMPACT_TEMPLATE)
    assert [json.loads(line) for line in _tool_list(full)] == tools
    assert _tool_list(compact) == [f"{t['function']['name']}({', '.join(t['function']['parameters']['properties'])})"
                                   for t in tools]
    # the rest of the prompt is the same text
    assert compact.replace("\n".join(_tool_list(compact)), "TOOLS") == \
        full.replace("\n".join(_tool_list(full)), "TOOLS")
    assert len(compact) < len(full) - 1000
    no_params = [{"type": "function", "function": {"name": "finish", "description": "done",
                                                   "parameters": {"type": "object", "properties": {}}}},
                 {"type": "function", "function": {"name": "ping", "description": "no schema"}}]
    assert _tool_list(hermes.render(messages[:2], no_params, template=hermes.CHATML_TOOLS_COMPACT_TEMPLATE)) \
        == ["finish()", "ping()"]


def test_generation_markers_render_as_their_text_and_no_tools_is_plain_chatml():
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
                {"role": "assistant", "content": "A <b>&\"x\""}]
    for template in (hermes.CHATML_TOOLS_TEMPLATE, hermes.CHATML_TOOLS_COMPACT_TEMPLATE):
        assert hermes.render(messages, None, template=template) == (
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
            "<|im_start|>assistant\nA <b>&\"x\"<|im_end|>\n<|im_start|>assistant\n")
        assert hermes.render(messages, [], template=template, add_generation_prompt=False).endswith(
            "A <b>&\"x\"<|im_end|>\n")


def _assistant_text(prompt: str) -> str:
    """The last assistant turn's text, as the model would generate it (up to its end-of-turn)."""
    return prompt.rsplit("<|im_start|>assistant\n", 1)[1].removesuffix("<|im_end|>\n")


@pytest.mark.parametrize("content", ["", "Searching first."])
def test_tool_calls_read_back_from_the_rendered_assistant_turn(tools, content):
    calls = [{"id": "x", "type": "function",
              "function": {"name": "search_graph", "arguments": '{"query": "Ehlers–Danlos \\"type 4\\"", "k": 5}'}},
             {"id": "y", "type": "function",
              "function": {"name": "explore_neighbors", "arguments": '{"node_id":12,"relation":null}'}}]
    messages = [*_chat(tools)[:2], {"role": "assistant", "content": content, "tool_calls": calls}]
    for template in (hermes.CHATML_TOOLS_TEMPLATE, hermes.CHATML_TOOLS_COMPACT_TEMPLATE):
        text = _assistant_text(hermes.render(messages, tools, template=template, add_generation_prompt=False))
        reply = hermes.parse_tool_calls(text, id_prefix="call_7")
        assert reply.content == content
        assert [c["function"] for c in reply.tool_calls] == [c["function"] for c in calls]  # the text as written
        assert [(c["id"], c["type"]) for c in reply.tool_calls] == [("call_7_0", "function"), ("call_7_1", "function")]
    # arguments given as an object are written as JSON and read back as that JSON's text
    obj = [{"id": "z", "type": "function", "function": {"name": "select", "arguments": {"node_ids": [3, 7]}}}]
    text = _assistant_text(hermes.render([{"role": "assistant", "content": "", "tool_calls": obj}], tools,
                                         add_generation_prompt=False))
    assert [json.loads(c["function"]["arguments"]) for c in hermes.parse_tool_calls(text).tool_calls] \
        == [{"node_ids": [3, 7]}]


def test_text_that_is_no_tool_call_stays_content():
    text = ('<tool_call>{"name": broken}</tool_call>\n<tool_call>\n{"name": "select", '
            '"arguments": "{\\"node_ids\\": [3]}"}\n</tool_call> then <tool_call>{"name": "finish", "arguments": {}}')
    reply = hermes.parse_tool_calls(text)
    assert reply.content == '<tool_call>{"name": broken}</tool_call>\n then'
    assert [c["function"] for c in reply.tool_calls] == [{"name": "select", "arguments": '{"node_ids": [3]}'},
                                                         {"name": "finish", "arguments": "{}"}]
    assert hermes.parse_tool_calls("The answer is FBN1.") == ("The answer is FBN1.", [])
    no_args = hermes.parse_tool_calls('<tool_call>{"name": "finish"}</tool_call>').tool_calls
    assert no_args[0]["function"] == {"name": "finish", "arguments": "{}"}


# ---- choosing the format: the backbone's local block and the server's flags ----------------------------------

def _gguf(path, payload: bytes):
    path.write_bytes(b"GGUF" + payload)
    return str(path)


def test_local_block_bad_values_name_the_key_and_the_valid_ones(tmp_path):
    cases = [({"chat": "ark-hermes"},
              r"^backbone.local has no key 'chat'; valid keys: model_path, lora_path, chat_format$"),
             ({"chat_format": "hermes"},
              r"^backbone.local.chat_format 'hermes' is not valid; valid: chatml-function-calling"
              r".*ark-hermes, ark-hermes-compact$"),
             ({"lora_path": str(tmp_path / "none.gguf")}, r"^backbone.local.lora_path: no file at .*none.gguf$"),
             ({"lora_path": str(tmp_path)}, r"^backbone.local.lora_path: no file at "),
             ({"model_path": 3}, r"^backbone.local.model_path must be a path to a GGUF file or null, got 3$"),
             (["ark-hermes"], r"^backbone.local must be a mapping with keys model_path, lora_path, chat_format")]
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_model.safetensors").write_bytes(b"{}")
    cases.append(({"lora_path": str(tmp_path / "adapter" / "adapter_model.safetensors")},
                  r"^backbone.local.lora_path: .*adapter_model.safetensors is not a GGUF file .*convert_lora_to_gguf"))
    for local, line in cases:
        with pytest.raises(ValueError, match=line):
            BackboneConfig(base_url=URL, local=local)
    with pytest.raises(ValueError, match=r"^backbone.local .*provider 'local' only, not 'vllm'"):
        BackboneConfig(provider="vllm", base_url=URL, local={"chat_format": "ark-hermes"})
    with pytest.raises(ValueError, match=r"^lora_path: no file at "):
        LocalServerConfig(lora_path=str(tmp_path / "none.gguf"))


def test_serving_revision_names_the_chat_format_and_the_adapter(tmp_path):
    # the default local backbone keys its replies as before
    assert BackboneConfig(base_url=URL).serving == REVISION
    assert BackboneConfig(base_url=URL, local={}).serving == REVISION
    assert BackboneConfig(base_url=URL, local={"model_path": None, "lora_path": None, "chat_format": None}).local \
        == {"model_path": None, "lora_path": None, "chat_format": "chatml-function-calling"}
    a, b = _gguf(tmp_path / "a.gguf", b"adapter one"), _gguf(tmp_path / "b.gguf", b"adapter two")
    copy_of_a = _gguf(tmp_path / "copy.gguf", b"adapter one")
    keys = {name: BackboneConfig(base_url=URL, local=local).serving for name, local in {
        "compact": {"chat_format": "ark-hermes-compact"}, "full": {"chat_format": "ark-hermes"},
        "a": {"chat_format": "ark-hermes-compact", "lora_path": a},
        "b": {"chat_format": "ark-hermes-compact", "lora_path": b},
        "copy": {"chat_format": "ark-hermes-compact", "lora_path": copy_of_a},
        "a_default_format": {"lora_path": a}}.items()}
    assert len({keys[k] for k in ("compact", "full", "a", "b", "a_default_format")}) == 5
    assert keys["copy"] == keys["a"]     # the adapter's contents, not its path
    assert keys["a_default_format"].startswith(REVISION + "+lora:")
    # the server's own backbone carries the same key as a backbone config naming what it serves
    server = LocalServer(chat_format="ark-hermes-compact", lora_path=b, model_alias="m")
    server.port = 8089
    assert server.backbone().serving == keys["b"] == serving_revision("ark-hermes-compact", b)
    server_default = LocalServer(model_alias="m")
    server_default.port = 8089
    assert server_default.backbone().serving == REVISION


def test_the_server_command_applies_the_adapter_and_the_chat_format(tmp_path):
    lora = _gguf(tmp_path / "student.gguf", b"lora")
    cmd = LocalServer(chat_format="ark-hermes-compact", lora_path=lora).command(tmp_path / "m.gguf", 5555)
    flags = dict(zip(cmd[3::2], cmd[4::2]))
    assert flags["--lora_path"] == lora and flags["--chat_format"] == "ark-hermes-compact"
    assert "--lora_path" not in LocalServer().command(tmp_path / "m.gguf", 5555)


def test_the_student_trains_on_the_templates_the_server_renders_with():
    from ark.distill.student import CHAT_TEMPLATES, training_chat_template
    from ark.llm.llama_server import HERMES_FORMATS

    assert training_chat_template(None, "chatml_tools") == HERMES_FORMATS["ark-hermes"]
    assert training_chat_template(None, "chatml_tools_compact") == HERMES_FORMATS["ark-hermes-compact"]
    assert "chatml_tools_compact" in CHAT_TEMPLATES
    assert re.search(r"{%-?\s*generation\s*-?%}", hermes.CHATML_TOOLS_COMPACT_TEMPLATE)


@pytest.mark.parametrize("provider", ["local", "vllm"])
@pytest.mark.parametrize("encoded", [False, True])
@pytest.mark.parametrize("http", list(TRANSPORTS))
def test_a_self_hosted_backbone_sends_the_tools_in_their_own_order(tools, http, encoded, provider):
    """llama.cpp and vLLM render the tool list as they receive it, so the keys must keep the order the
    student was trained on (the canonical encoding of the cache key sorts them), also when the agent's
    schemas come encoded once (`Encoded`)."""
    from ark.cost.tokens import Encoded

    assert json.dumps(tools) != json.dumps(tools, sort_keys=True)   # an order that sorting would change
    with ScriptedServer([text_reply("ok")]) as s:
        client = LLMClient(BackboneConfig(provider=provider, base_url=s.base_url, model="m", http=http,
                                          max_retries=0))
        asyncio.run(client.chat([{"role": "user", "content": "q"}], Encoded(tools) if encoded else tools))
        asyncio.run(client.aclose())
    assert json.dumps(s.requests[0]["tools"]) == json.dumps(tools)
    assert hermes.render([], s.requests[0]["tools"], template=hermes.CHATML_TOOLS_COMPACT_TEMPLATE) \
        == hermes.render([], tools, template=hermes.CHATML_TOOLS_COMPACT_TEMPLATE)


@pytest.mark.parametrize("setting,message", [
    ("+backbone.local.chat_format=hermes", "backbone.local.chat_format 'hermes' is not valid; valid: "
                                           "chatml-function-calling, functionary-v2, chatml, llama-3, ark-hermes, "
                                           "ark-hermes-compact"),
    ("+backbone.local.lora=x.gguf", "backbone.local has no key 'lora'; valid keys: model_path, lora_path, chat_format"),
])
def test_ark_run_names_the_bad_local_block_value_in_one_line(setting, message, tmp_path, capsys):
    from ark.cli.main import main

    kg = Path(__file__).parent / "data" / "tables_kg"
    code = main(["run", "graph=tables", f"graph.path={kg}", "backbone=local", setting, f"paths.data={tmp_path}"])
    err = capsys.readouterr().err
    assert code != 0 and err.strip().splitlines() == [f"ark run: error: bad setting in backbone: {message}"]
    assert not any(tmp_path.iterdir())
