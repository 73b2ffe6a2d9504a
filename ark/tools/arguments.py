"""The argument coercion the tools share: `ToolInputError` (an argument the LLM must fix; its message
is the observation) and the readers of integers, k, offsets, queries and type or relation names.

What can be fixed up is (ids and numbers as strings, a float that is a whole number, names in another
case); what cannot raises `ToolInputError` naming the value and what to send instead. `ark.tools.toolset`
re-exports them for the tool modules.

    loads_arguments('{"query": "a\nb"}')  # {'query': 'a\nb'}: a raw newline in a string is kept
    _as_int("k", "12")                    # 12
    _resolve_names("node_types", "Gene", ["gene", "drug"], "node type")   # ['gene']
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np


class ToolInputError(ValueError):
    """An argument the LLM sent cannot be used; the message is shown to the LLM."""


def loads_arguments(text: str):
    """A tool call's JSON arguments as the model wrote them. Control characters inside strings are
    taken as they are (``strict=False``): small models write a raw newline into a query, which is what
    they mean, not a reason to reject the call (raises json.JSONDecodeError otherwise)."""
    return json.loads(text, strict=False)


def _as_int(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise ToolInputError(f"{name} must be an integer, not {json.dumps(value)}; send a number such as 3")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        try:
            return int(s)
        except ValueError:
            try:
                f = float(s)
            except ValueError:
                f = None
            if f is not None and f.is_integer():
                return int(f)
    raise ToolInputError(f"{name} must be an integer, not {_show(value)}; send a number such as 3")


def _show(value, limit: int = 80) -> str:
    try:
        s = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        s = repr(value)
    return s if len(s) <= limit else s[:limit] + "…"


def _resolve_names(arg: str, value, valid: Sequence[str], kind: str) -> list[str] | None:
    """A list of canonical names from a string or list of strings; None (no filter) for None or []."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
        raise ToolInputError(f"{arg} must be a list of {kind} names, not {_show(value)}; "
                             f"send for example [{_show(valid[0]) if valid else ''}]")
    if not value:
        return None
    folded = {v.strip().lower(): v for v in valid}
    out, bad = [], []
    for x in value:
        name = x if x in valid else folded.get(x.strip().lower())
        if name is None:
            bad.append(x)
        elif name not in out:
            out.append(name)
    if bad:
        raise ToolInputError(f"{arg} names the unknown {kind} {', '.join(map(_show, bad))}; "
                             f"use only these {kind}s: {', '.join(map(_show, valid))}")
    return out


def _clamp_k(value, default: int, cap: int, notes: list[str]) -> int:
    if value is None:
        return default
    k = _as_int("k", value)
    if k < 1:
        notes.append(f"note: k={k} is below 1; using k=1.")
        return 1
    if k > cap:
        notes.append(f"note: k={k} is above the maximum {cap}; using k={cap}.")
        return cap
    return k


def _as_offset(value) -> int:
    if value is None:
        return 0
    offset = _as_int("offset", value)
    if offset < 0:
        raise ToolInputError(f"offset must be >= 0 (0 starts from the top), got {offset}")
    return offset


# the longest query search_graph and explore_neighbors take: longer ones are refused before any work (a
# 10 MB query was tokenized and scored in full, a stdio MCP server answering nothing else meanwhile)
QUERY_MAX_CHARS = 4000


def _as_query(value, required: bool) -> str | None:
    if value is None:
        if required:
            raise ToolInputError("query is missing; send a few keywords to search for")
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ToolInputError(f"query must be a string of keywords, not {_show(value)}")
    if len(value) > QUERY_MAX_CHARS:
        raise ToolInputError(f"query is {len(value):,} characters long; the limit is {QUERY_MAX_CHARS:,} "
                             "characters: send a few keywords")
    return value
