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

    python -m ark.llm.llama_server --model m.gguf --chat_format chatml-function-calling ...  # llama_cpp.server's flags

Only this process imports llama_cpp; `bounded` and `visible_messages` are plain Python.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from typing import Any, Callable

# the prompt rendering this module gives; BackboneConfig.serving (provider local) puts it in every LLM
# cache key, so replies cached under llama-cpp-python's own rendering (observations dropped) never return
REVISION = "ark.local_chat/2"
# set by LocalServer to its own pid: the server stops when that process is gone
PARENT_ENV = "ARK_LOCAL_SERVER_PARENT"
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


def chat_format_arg(argv: list[str]) -> str | None:
    """The value of ``--chat_format`` in llama_cpp.server's arguments, if given."""
    for i, arg in enumerate(argv):
        if arg == "--chat_format" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--chat_format="):
            return arg.split("=", 1)[1]
    return None


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
    from llama_cpp import llama_chat_format
    from llama_cpp.server.__main__ import main as serve

    name = chat_format_arg(argv)
    if name is not None:
        handler = llama_chat_format.get_chat_completion_handler(name)
        wrap = faithful if name == "chatml-function-calling" else bounded
        llama_chat_format.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
            name, wrap(handler), overwrite=True)
    sys.argv = [sys.argv[0], *argv]
    serve()


if __name__ == "__main__":
    main()
