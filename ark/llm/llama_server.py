"""The process `LocalServer` runs: llama-cpp-python's OpenAI server, with its chat format made to show
the model the whole conversation and to stop every completion at ``max_tokens``.

Two faults of llama-cpp-python 0.3.36's ``chatml-function-calling`` handler are corrected by wrapping it
(`faithful`), without changing the library:

1. Its prompt template has no branch for ``role: "tool"`` messages: it writes ``<|im_start|>tool`` and
   drops the content, so the model never sees a single observation (which is why a small model kept
   selecting ids it was never shown). It also renders with HTML autoescape on, so every ``"`` in the
   system prompt, observations and the model's own earlier arguments reaches the model as ``&#34;``,
   and the model imitates it. `visible_messages` turns each tool result into a user turn headed
   ``functions.<name> result:`` (the template's own notation for calls) and marks all text as safe, so
   the model reads it verbatim.
2. It ignores the request's ``max_tokens``: it generates the tool name, the tool's JSON arguments
   (under a grammar built from the tool's schema) and plain messages with ``max_tokens=None``, i.e.
   until the grammar closes or the context (8,192 tokens) is full. A small model that writes an endless
   query string keeps the server busy for minutes on one reply (each grammar-constrained token costs
   30-40 ms on one core) and every other agent waits behind it until the client times out. `bounded`
   stops each completion after the request's ``max_tokens`` (`FALLBACK_MAX_TOKENS` when it sets
   none); a cut-off tool call reaches the agent as malformed arguments, which it reports to the model
   like any other bad call. Every other chat format named is bounded too.

Two chat formats of its own serve a student in the format it was trained on (`ark.llm.hermes`):
``ark-hermes`` (ChatML, each tool's JSON schema listed, Hermes ``<tool_call>`` blocks, tool results as
``<tool_response>`` in user turns) and ``ark-hermes-compact`` (each tool listed as ``name(param, ...)``).
`hermes_handler` renders the request with `ark.llm.hermes.render` (the text transformers renders in
training), completes it up to ``<|im_end|>`` through ``Llama.create_completion`` (so the server's RAM
prompt cache serves it) and reads the Hermes blocks back as OpenAI ``tool_calls``. It follows the
request's sampling settings. A ``tool_choice`` naming a function (the agent's ``first_search`` and
``final_select``) starts the reply with that call's opening, ``<tool_call>\n{"name": "<name>", "arguments":``,
and decodes the arguments under a grammar made from the tool's JSON schema; "auto", "required" and
"none" leave the reply to the model, which calls tools as it was trained to.

    python -m ark.llm.llama_server --model m.gguf --chat_format chatml-function-calling ...  # llama_cpp.server's flags

Its ``--cache`` (a RAM prompt cache of ``--cache_size`` bytes) counts all of each entry against that size
(`counted`): the library counts only the model state, not the logits kept with it, five times as much.

Only this process imports llama_cpp; everything else here is plain Python (`serving_revision` and
`check_gguf` are used by the processes that start the server and key its replies).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ark.llm import hermes

# the prompt rendering this module gives; BackboneConfig.serving (provider local) puts it in every LLM
# cache key, so replies cached under llama-cpp-python's own rendering (observations dropped) never return
REVISION = "ark.local_chat/2"
# the rendering of the ark-hermes formats (`serving_revision` adds the format's name and the adapter's digest)
HERMES_REVISION = "ark.hermes/1"
DEFAULT_CHAT_FORMAT = "chatml-function-calling"
# chat formats of this module's own: name -> the ark.llm.hermes template it renders with
HERMES_FORMATS = {"ark-hermes": hermes.CHATML_TOOLS_TEMPLATE,
                  "ark-hermes-compact": hermes.CHATML_TOOLS_COMPACT_TEMPLATE}
# the chat formats a LocalServer may run (llama-cpp-python's that parse tool calls, and ours)
CHAT_FORMATS = (DEFAULT_CHAT_FORMAT, "functionary-v2", "chatml", "llama-3", *HERMES_FORMATS)
# a file the ark-hermes handler appends each request's prompt and completion text to, one JSON line each
# ({"prompt", "text"}), when this variable names one (debugging, and the integration test's view of the prompt)
PROMPT_LOG_ENV = "ARK_LOCAL_PROMPT_LOG"
# set by LocalServer to its own pid: the server stops when that process is gone
PARENT_ENV = "ARK_LOCAL_SERVER_PARENT"
# the server log's line saying how the prompt cache's budget is counted (`counted`)
CACHE_NOTE = "ark: the prompt cache counts whole entries (model state, logits and token ids) against --cache_size"
# when a request carries no max_tokens (the repo's clients always send one)
FALLBACK_MAX_TOKENS = 1024


class _CappedLlama:
    """A view of a ``Llama`` whose ``create_completion`` never runs unbounded."""

    def __init__(self, llama: Any, max_tokens: int):
        self._llama = llama
        self._max_tokens = max_tokens

    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        asked = kwargs.get("max_tokens")
        if asked is None or asked <= 0 or asked > self._max_tokens:
            kwargs["max_tokens"] = self._max_tokens
        return self._llama.create_completion(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)


def bounded(handler: Callable[..., Any]) -> Callable[..., Any]:
    """The chat handler ``handler`` with each of its completions stopped after the request's
    ``max_tokens`` (`FALLBACK_MAX_TOKENS` when the request has none)."""

    @functools.wraps(handler)
    def run(*, llama: Any, max_tokens: int | None = None, **kwargs: Any) -> Any:
        cap = max_tokens if max_tokens and max_tokens > 0 else FALLBACK_MAX_TOKENS
        return handler(llama=_CappedLlama(llama, cap), max_tokens=cap, **kwargs)

    return run


def visible_messages(messages: list[dict]) -> list[dict]:
    """The conversation as chatml-function-calling's template can show it: each ``tool`` message as a
    user turn ``functions.<name> result:\n<content>`` (the name from the assistant call it answers),
    and every text (contents, call arguments) marked safe for the template's autoescape."""
    from markupsafe import Markup

    names: dict[str, str] = {}
    out = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc.get("function") or {})
                names[tc.get("id")] = fn.get("name", "tool")
                fn["arguments"] = Markup(fn.get("arguments") or "")
                calls.append({**tc, "function": fn})
            m["tool_calls"] = calls
        elif m.get("role") == "tool":
            m = {"role": "user",
                 "content": f"functions.{names.get(m.get('tool_call_id'), 'tool')} result:\n{m.get('content') or ''}"}
        if isinstance(m.get("content"), str):
            m["content"] = Markup(m["content"])
        out.append(m)
    return out


def faithful(handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler`` (chatml-function-calling) seeing `visible_messages` and stopped at ``max_tokens``."""
    inner = bounded(handler)

    @functools.wraps(handler)
    def run(*, messages: list[dict], **kwargs: Any) -> Any:
        return inner(messages=visible_messages(messages), **kwargs)

    return run


def hermes_handler(template: str) -> Callable[..., Any]:
    """A llama-cpp-python chat completion handler rendering requests with `ark.llm.hermes` ``template``."""

    def handler(*, llama: Any, messages: list[dict], tools: list[dict] | None = None,
                functions: list[dict] | None = None, temperature: float = 0.2, top_p: float = 0.95,
                top_k: int = 40, min_p: float = 0.05, typical_p: float = 1.0, stream: bool = False,
                stop: str | list[str] | None = None, seed: int | None = None, max_tokens: int | None = None,
                presence_penalty: float = 0.0, frequency_penalty: float = 0.0, repeat_penalty: float = 1.1,
                tfs_z: float = 1.0, mirostat_mode: int = 0, mirostat_tau: float = 5.0, mirostat_eta: float = 0.1,
                model: str | None = None, logits_processor: Any = None, grammar: Any = None,
                logit_bias: dict | None = None, tool_choice: Any = None, **_: Any) -> dict:
        if stream:
            raise ValueError("the ark-hermes chat formats do not stream; send stream=false")
        if functions and not tools:
            tools = [{"type": "function", "function": f} for f in functions]
        prompt = hermes.render(messages, tools or None, template=template)
        prefix = ""
        forced = _forced_tool(tool_choice, tools)
        if forced is not None:     # the call's opening, as the template writes it; its arguments under a grammar
            prefix = '<tool_call>\n{"name": "' + forced["name"] + '", "arguments":'
            grammar = _arguments_grammar(forced.get("parameters") or {})
        # the text as transformers tokenizes a rendered chat in training: special tokens parsed, no BOS added
        tokens = llama.tokenize((prompt + prefix).encode("utf-8"), add_bos=False, special=True)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        completion = llama.create_completion(
            prompt=tokens, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, typical_p=typical_p,
            stop=[hermes.END_OF_TURN, *stops], seed=seed, max_tokens=max_tokens, presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty, repeat_penalty=repeat_penalty, tfs_z=tfs_z,
            mirostat_mode=mirostat_mode, mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta, model=model,
            logits_processor=logits_processor, grammar=grammar, logit_bias=logit_bias)
        choice = completion["choices"][0]
        text = choice["text"] if forced is None else prefix + choice["text"].rstrip() + "}\n</tool_call>"
        if os.environ.get(PROMPT_LOG_ENV):
            with open(os.environ[PROMPT_LOG_ENV], "a", encoding="utf-8") as f:
                f.write(json.dumps({"prompt": prompt, "prefix": prefix, "text": text}) + "\n")
        reply = hermes.parse_tool_calls(text, id_prefix=f"call_{completion['id']}")
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        return {"id": "chat" + completion["id"], "object": "chat.completion", "created": completion["created"],
                "model": completion["model"],
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if reply.tool_calls else choice["finish_reason"]}],
                "usage": completion["usage"]}

    return handler


def _forced_tool(tool_choice: Any, tools: list[dict] | None) -> dict | None:
    """The function a ``{"type": "function", "function": {"name": ...}}`` tool choice names, or None."""
    if not isinstance(tool_choice, dict):
        return None
    name = (tool_choice.get("function") or {}).get("name")
    for tool in tools or []:
        if (tool.get("function") or {}).get("name") == name:
            return tool["function"]
    raise ValueError(f"tool_choice names {name!r}, which is not among the request's tools")


def _arguments_grammar(schema: dict) -> Any:
    """A llama.cpp grammar for one space and a JSON object valid under ``schema`` (properties in the
    schema's order), or any JSON object when the schema cannot be converted."""
    from llama_cpp import llama_grammar

    try:
        gbnf = llama_grammar.json_schema_to_gbnf(json.dumps(schema), prop_order=list(schema.get("properties") or []))
    except Exception:   # a schema llama.cpp's converter does not support
        gbnf = llama_grammar.JSON_GBNF
    gbnf = re.sub(r"^root\s*::=", "ark-arguments ::=", gbnf, count=1, flags=re.MULTILINE)
    return llama_grammar.LlamaGrammar.from_string('root ::= " " ark-arguments\n' + gbnf, verbose=False)


def adapter_digest(path: str | Path) -> str:
    """The first 16 hex digits of a file's SHA-256: a LoRA adapter's identity in the serving revision."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def check_gguf(path: str | Path, key: str) -> None:
    """ValueError, one line naming ``key``, unless ``path`` is a GGUF file (llama.cpp reads no other)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{key}: no file at {p}")
    with open(p, "rb") as f:
        if f.read(4) != b"GGUF":
            hint = (" (llama.cpp reads LoRA adapters as GGUF: convert a PEFT adapter with llama.cpp's "
                    "convert_lora_to_gguf.py)") if "lora" in key else ""
            raise ValueError(f"{key}: {p} is not a GGUF file{hint}")


def serving_revision(chat_format: str = DEFAULT_CHAT_FORMAT, lora_path: str | Path | None = None) -> str:
    """What keys a local server's replies (`ark.llm.client.BackboneConfig.serving`): the rendering of its
    chat format (`REVISION` for chatml-function-calling, as before formats were chosen; `HERMES_REVISION`
    and the name for ark-hermes ones) and, with an adapter, the adapter file's digest, so the replies of
    one adapter are never replayed for another."""
    if chat_format not in CHAT_FORMATS:
        raise ValueError(f"unknown chat_format {chat_format!r}; valid: {list(CHAT_FORMATS)}")
    if chat_format == DEFAULT_CHAT_FORMAT:
        revision = REVISION
    elif chat_format in HERMES_FORMATS:
        revision = f"{HERMES_REVISION}:{chat_format}"
    else:
        revision = f"{REVISION}:{chat_format}"
    return revision if lora_path is None else f"{revision}+lora:{adapter_digest(lora_path)}"


def chat_format_arg(argv: list[str]) -> str | None:
    """The value of ``--chat_format`` in llama_cpp.server's arguments, if given."""
    for i, arg in enumerate(argv):
        if arg == "--chat_format" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--chat_format="):
            return arg.split("=", 1)[1]
    return None


def entry_bytes(state: Any) -> int:
    """What one entry of llama-cpp-python's prompt cache (a ``LlamaState``) holds: the model's state and the
    copies of the logits (``scores``: n_batch rows of the vocabulary) and of the token ids kept beside it."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


def counted(ram_cache: type) -> type:
    """llama-cpp-python's RAM prompt cache class ``ram_cache`` with its budget counting all of each entry
    (`entry_bytes`). The library counts the model state alone: a SmolLM2 entry is about 17 MB of state and
    85-96 MB of logits, so a 512 MiB budget held 25 entries, 2.6 GB (``scripts/bench_prompt_cache.py``)."""

    class CountedRAMCache(ram_cache):
        @property
        def cache_size(self) -> int:
            return sum(entry_bytes(s) for s in self.cache_state.values())

    CountedRAMCache.__qualname__ = CountedRAMCache.__name__ = f"Counted{ram_cache.__name__}"
    return CountedRAMCache


def exit_with_parent(parent_pid: int, poll_s: float = 1.0) -> threading.Thread:
    """Stop this process once ``parent_pid`` is no longer its parent (the process that started the
    server was killed, even with SIGKILL, before it could stop the server)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os._exit(0)

    t = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    t.start()
    return t


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if os.environ.get(PARENT_ENV):
        exit_with_parent(int(os.environ[PARENT_ENV]))
    import llama_cpp
    from llama_cpp import llama_chat_format
    from llama_cpp.server.__main__ import main as serve

    llama_cpp.LlamaRAMCache = counted(llama_cpp.LlamaRAMCache)   # the server builds its --cache from this name
    print(CACHE_NOTE, file=sys.stderr, flush=True)

    name = chat_format_arg(argv)
    if name in HERMES_FORMATS:
        handler = bounded(hermes_handler(HERMES_FORMATS[name]))
    elif name is not None:
        wrap = faithful if name == DEFAULT_CHAT_FORMAT else bounded
        handler = wrap(llama_chat_format.get_chat_completion_handler(name))
    if name is not None:
        llama_chat_format.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
            name, handler, overwrite=True)
    sys.argv = [sys.argv[0], *argv]
    serve()


if __name__ == "__main__":
    main()
