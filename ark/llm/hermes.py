"""Hermes tool calls on ChatML: the prompt format a ChatML student is trained on and served in.

One format, two uses. Distillation (`ark.distill.student`) renders trajectories with these templates
through transformers' ``apply_chat_template``; the local server (`ark.llm.llama_server`, chat formats
``ark-hermes`` and ``ark-hermes-compact``) renders each request with `render`, which reproduces
transformers' rendering text for text, so a student sees at serving time exactly the prompt it was
trained on. Tool calls are Hermes blocks, ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``
(what Qwen2.5/Qwen3 write and vLLM's ``hermes`` parser reads); tool results are ``<tool_response>``
blocks inside a user turn; assistant output sits inside ``{% generation %}`` so transformers'
``return_assistant_tokens_mask`` marks exactly it (`render` treats the markers as plain blocks).

    from ark.llm import hermes
    prompt = hermes.render(messages, tools, template=hermes.CHATML_TOOLS_COMPACT_TEMPLATE)
    reply = hermes.parse_tool_calls(generated_text)   # reply.content, reply.tool_calls (OpenAI-style)

Only jinja2 is needed (llama-cpp-python and transformers both depend on it), imported on first render.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, NamedTuple

# The system turn: the caller's system prompt, then the tool list between <tools></tools> (TOOL_LIST is
# replaced by one of the two tool list renderings below) and the call format.
_HEAD = (
    "{%- set sys = messages[0].content if (messages and messages[0].role == 'system') else none %}"
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if sys %}{{- sys + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions. Their signatures are given within <tools></tools> "
    "XML tags:\\n<tools>' }}"
)
# each tool as its JSON schema, one per line (tojson: json.dumps without ASCII escapes, as transformers has it)
_TOOLS_JSON = "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
# each tool as `name(param1, param2, ...)`: the property names of its parameters' schema, in order
_TOOLS_COMPACT = (
    "{%- for tool in tools %}"
    "{%- set f = tool.function if tool.function is defined else tool %}"
    "{{- '\\n' + f.name + '(' }}"
    "{%- if f.parameters is defined and f.parameters.properties is defined %}"
    "{{- f.parameters.properties | join(', ') }}"
    "{%- endif %}"
    "{{- ')' }}"
    "{%- endfor %}"
)
_BODY = (
    "{{- '\\n</tools>\\n\\nFor each function call, return a JSON object with the function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif sys is not none %}"
    "{{- '<|im_start|>system\\n' + sys + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and loop.first %}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- if message.tool_calls %}{%- for tc in message.tool_calls %}"
    "{%- set f = tc.function if tc.function is defined else tc %}"
    "{%- if message.content or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + f.name + '\", \"arguments\": ' }}"
    "{%- if f.arguments is string %}{{- f.arguments }}{%- else %}{{- f.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endgeneration %}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + (message.content or '') + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# ChatML with tools in the Hermes format, each tool's full JSON schema listed. Prefix-preserving: a
# message renders the same whatever follows it.
CHATML_TOOLS_TEMPLATE = _HEAD + _TOOLS_JSON + _BODY
# The same with each tool on one line as `name(param1, ...)` (about 500 tokens fewer per prompt with
# ARK's tools): for a small student whose context is short and who learns the tools from its data.
CHATML_TOOLS_COMPACT_TEMPLATE = _HEAD + _TOOLS_COMPACT + _BODY

END_OF_TURN = "<|im_end|>"  # where an assistant turn ends (the stop string when serving)


@functools.lru_cache(maxsize=8)
def _compiled(template: str):
    """``template`` compiled in an environment like transformers' for chat templates: sandboxed, no
    autoescape, trim_blocks and lstrip_blocks, loop controls, a ``tojson`` that keeps non-ASCII text,
    and ``{% generation %}`` blocks rendered as their body."""
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}``: the body in a call block that returns it unchanged
        (transformers records where such a block starts and ends; the text is the same)."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template)


def render(messages: list[dict], tools: list[dict] | None = None, template: str = CHATML_TOOLS_TEMPLATE,
           add_generation_prompt: bool = True, **kwargs: Any) -> str:
    """The prompt text ``template`` gives the conversation: the text transformers' ``apply_chat_template(
    messages, tools=tools, tokenize=False, add_generation_prompt=...)`` returns with that template."""
    return _compiled(template).render(messages=messages, tools=tools, documents=None,
                                      add_generation_prompt=add_generation_prompt, **kwargs)


# ---- reading a reply back ----------------------------------------------------------------------

_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_JSON_SPACE = " \t\n\r"


class ParsedReply(NamedTuple):
    """An assistant reply split into its text and its tool calls."""

    content: str  # the text outside the parsed <tool_call> blocks, stripped ("" when there is none)
    tool_calls: list[dict]  # [{"id", "type": "function", "function": {"name", "arguments": JSON text}}]


def _raw_value(text: str, key: str) -> str | None:
    """The exact text of ``key``'s value in the JSON object that ``text`` starts with (already known to
    parse), so arguments reach the agent as the model wrote them; None when the key is absent."""
    decoder, found, i = json.JSONDecoder(), None, 1

    def skip(i: int) -> int:
        while i < len(text) and text[i] in _JSON_SPACE:
            i += 1
        return i

    while True:
        i = skip(i)
        if text[i] == "}":
            return found
        name, i = decoder.raw_decode(text, i)
        i = skip(skip(i) + 1)          # past the ':'
        _, end = decoder.raw_decode(text, i)
        if name == key:
            found = text[i:end]        # the last one wins, as in json.loads
        i = skip(end)
        if text[i] == ",":
            i += 1


def _call(block: str) -> tuple[str, str] | None:
    """(name, arguments as JSON text) of one block's JSON object, or None when it is no call."""
    try:
        obj, _ = json.JSONDecoder().raw_decode(block)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", {})
    if isinstance(args, str):          # arguments written as a JSON string: its text is the arguments
        return obj["name"], args
    raw = _raw_value(block, "arguments")
    return obj["name"], raw if raw is not None else json.dumps(args, ensure_ascii=False)


def parse_tool_calls(text: str, id_prefix: str = "call") -> ParsedReply:
    """The Hermes tool calls in generated ``text`` as OpenAI ``tool_calls`` entries (ids
    ``<id_prefix>_0``, ``<id_prefix>_1``, ...), and the text left around them.

    A block whose JSON does not parse, or has no string "name", is no call and stays in the content (the
    agent records such mistakes). A missing closing tag at the end of the text is tolerated. Arguments
    are the JSON text the model wrote (a JSON string's value when it wrote a string).
    """
    calls, kept, last = [], [], 0
    for m in _TOOL_CALL_RE.finditer(text):
        call = _call(m.group(1))
        if call is None:
            continue
        kept.append(text[last:m.start()])
        last = m.end()
        calls.append({"id": f"{id_prefix}_{len(calls)}", "type": "function",
                      "function": {"name": call[0], "arguments": call[1]}})
    kept.append(text[last:])
    return ParsedReply("".join(kept).strip(), calls)
