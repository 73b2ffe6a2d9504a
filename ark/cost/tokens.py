"""Prompt tokens before a reply says how many there were: a prompt's characters at `CHARS_PER_TOKEN`.

Used where a call must be counted before it is sent: the spending cap's worst case of a call
(`ark.cost.cap`) and the tokens-per-minute pacing of requests (`ark.llm.pacing`).

    prompt_tokens_upper(messages, tools)   # about chars / 3 + 1
"""

from __future__ import annotations

import json

CHARS_PER_TOKEN = 3.0  # characters per prompt token before the reply says: on the high side (English runs
                       # about 4 per token, JSON tool schemas about 3)


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
_IN_ORDER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


def canonical(x) -> str:
    """The canonical JSON of ``x``: keys sorted, no spaces, characters as they are. A chat request's
    messages and tools are encoded so once per call (`ark.llm.client`): the LLM cache's key
    (`ark.llm.cache.cache_key`), the HTTP body and `prompt_chars` are made of that one encoding. An
    `Encoded` list gives the encoding it was made with."""
    if type(x) is Encoded:
        return x.json
    return _CANONICAL.encode(x)   # json.dumps with these settings, its encoder made once


def in_order(x) -> str:
    """``x`` as compact JSON with its keys in their own order (`canonical` without the sorting): what a
    server that writes the tool schemas into the prompt as it receives them must get. An `Encoded` list
    gives the one it was made with."""
    if type(x) is Encoded:
        return x.given
    return _IN_ORDER.encode(x)


class Encoded(list):
    """A list sent unchanged with every request (an agent's tool schemas) with its `canonical` JSON, and
    its JSON in its own key order (`in_order`), made once, when the list is made. It refuses to be changed
    in place; its items are not to be changed either (a request that offers other schemas builds a new
    list)."""

    def __init__(self, items=()):
        super().__init__(items)
        self.json = canonical(list(self))
        self.given = in_order(list(self))

    def __reduce__(self):
        return type(self), (list(self),)

    def _frozen(self, *args, **kwargs):
        raise TypeError("an Encoded list is not changed after it is made; build a new one")

    append = extend = insert = pop = remove = clear = sort = reverse = _frozen
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _frozen


def prompt_chars(messages: list, tools: list | None) -> int:
    """The characters of a chat request's messages and tool schemas, as (`canonical`) JSON."""
    return len(canonical(messages)) + (len(canonical(tools)) if tools else 0)


def prompt_tokens_upper(messages: list, tools: list | None) -> int:
    """A high estimate of a chat request's prompt tokens: its characters at `CHARS_PER_TOKEN`."""
    return int(prompt_chars(messages, tools) / CHARS_PER_TOKEN) + 1
