"""Rendering tool results as the compact text observations the LLM reads.

One line per node::

    [3] FBN1 (gene/protein) score=1.234 | associated with | …connective tissue…
    [8] Smith J (author) | -> writes | …

* ``[id] name (type)``: the node id is what the agent passes to the next tool or to ``select`` (the
  internal id, or the graph's own where the tools show those: `ark.tools.ids`);
* ``score=``: the BM25 score of the subquery (left out when the call had no subquery);
* for neighbors, each relation linking the explored node v and this node, with its direction where
  the direction carries information: ``-> r`` for a stored edge ``v -r-> u``, ``<- r`` for
  ``u -r-> v``, and plain ``r`` for a relation whose every edge is stored both ways (all of PRIME's
  and the demo's) and for every relation of a graph read with ``edges="stark"`` (undirected as stark-qa
  reads it: a node's neighbors come from its own stored edges), where the arrows would say nothing;
* a snippet of the node's text around the matched query terms (the start of the text without a query).

The observation ends with ``showing k of N ...``. Its length is budgeted in *approximate tokens*:
`approx_tokens` counts one token per 4 characters (rounded up), OpenAI's rule of thumb for English; node
lines are dropped from the end once the budget would be exceeded, and the footer says so.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ark.search.bm25 import Tokenizer

_SCAN_CHARS = 8000  # snippets look at most this far into a document
ELLIPSIS = "…"


def approx_tokens(text: str) -> int:
    """Approximate token count: ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


class Snippeter:
    """Cuts a window of about ``width`` characters around the densest run of matched query terms."""

    def __init__(self, tokenizer: Tokenizer, width: int = 160):
        self.tokenizer = tokenizer
        self.width = width

    def __call__(self, text: str, terms: Sequence[str] = (), drop: Sequence[str] = ()) -> str:
        """Snippet of ``text`` around ``terms`` (stemmed tokens). Lines of the form ``- key: value`` whose
        value is one of ``drop`` (the node's name and type, already shown) are left out."""
        text = _clean(text[:_SCAN_CHARS], drop)
        if len(text) <= self.width:
            return text
        start = 0
        if terms:
            start = self._best_start(text, set(terms))
        end = min(len(text), start + self.width)
        if end == len(text):
            start = max(0, end - self.width)
        # widen to word boundaries (by at most 20 characters) so no word is cut in half
        lo, hi = max(0, start - 20), min(len(text), end + 20)
        while start > lo and text[start - 1] != " ":
            start -= 1
        while end < hi and text[end] != " ":
            end += 1
        out = text[start:end].strip()
        return (ELLIPSIS if start > 0 else "") + out + (ELLIPSIS if end < len(text) else "")

    def _best_start(self, text: str, terms: set[str]) -> int:
        # Only words sharing their first 3 letters with a term can stem to it (Snowball English keeps
        # word starts, bar a few irregular forms), so a regex finds those and only they are stemmed.
        lower = text.lower()
        spans = [(m.start(), m.group()) for m in _prefix_pattern(frozenset(terms)).finditer(lower)]
        if not spans:
            return 0
        tok = self.tokenizer
        stems = tok._stemmer().stemWords([w for _, w in spans]) if tok.stem else [w for _, w in spans]
        hits = [(pos, s) for (pos, _), s in zip(spans, stems) if s in terms][:200]
        if not hits:
            return 0
        # the start whose window (the next 50 hits, those within 3/4 of the width) holds the most distinct
        # terms, the first such; one pass, the window's term counts kept as it slides
        reach = self.width * 3 // 4
        best, best_count = hits[0][0], 0
        counts: dict[str, int] = {}
        end = 0
        for i, (pos, term) in enumerate(hits):
            limit = min(i + 50, len(hits))
            while end < limit and hits[end][0] < pos + reach:
                counts[hits[end][1]] = counts.get(hits[end][1], 0) + 1
                end += 1
            if len(counts) > best_count:
                best, best_count = pos, len(counts)
            if end > i:   # hits[i] leaves the window
                if counts[term] == 1:
                    del counts[term]
                else:
                    counts[term] -= 1
            else:
                end = i + 1
        return max(0, best - self.width // 4)


@functools.lru_cache(maxsize=256)
def _prefix_pattern(terms: frozenset[str]) -> re.Pattern:
    prefixes = sorted({t[:3] for t in terms}, key=len, reverse=True)
    return re.compile(r"(?u)\b(?:" + "|".join(map(re.escape, prefixes)) + r")\w*")


def _clean(text: str, drop: Sequence[str]) -> str:
    """Text on one line: ``- key: value`` lines joined by "; "; bare headings (``details:``) and lines
    whose value is in ``drop`` removed."""
    drop_set = {d.strip().lower() for d in drop}
    kept = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("- "):
            line = line[2:]
        if not line or line.endswith(":"):  # empty or a bare heading such as "details:"
            continue
        key, sep, value = line.partition(": ")
        if sep and value.strip().lower() in drop_set:
            continue
        kept.append(line)
    return " ".join("; ".join(kept).split())


@dataclass
class NodeLine:
    """One node of a tool result, ready to render."""

    node_id: int
    name: str
    type_name: str
    snippet: str
    score: float | None = None
    links: list[tuple[str, bool | None]] = field(default_factory=list)  # (relation, outgoing; None: both ways)
    shown_id: int | str | None = None  # the id in brackets (ark.tools.ids: the graph's own); None: node_id

    def render(self) -> str:
        shown = self.node_id if self.shown_id is None else self.shown_id
        parts = [f"[{shown}] {self.name} ({self.type_name})"]
        if self.score is not None:
            parts[0] += f" score={self.score:.3f}"
        if self.links:
            parts.append(", ".join(rel if out is None else ("-> " if out else "<- ") + rel for rel, out in self.links))
        if self.snippet:
            parts.append(self.snippet)
        return " | ".join(parts)


def render(header: str, lines: Sequence[NodeLine], total: int, what: str, notes: Sequence[str] = (),
           max_tokens: int = 2000) -> tuple[str, list[int]]:
    """Header, notes, node lines and the ``showing k of N <what>`` footer, within ``max_tokens``.

    Returns the text and the ids of the nodes actually shown."""
    head = [header, *notes]
    rendered = [line.render() for line in lines]
    footer_len = len(f"showing {len(lines)} of {total} {what} (cut to the {max_tokens}-token observation budget)")
    budget = max_tokens * 4 - sum(len(h) + 1 for h in head) - footer_len
    shown = 0
    for r in rendered:
        if budget - (len(r) + 1) < 0:
            break
        budget -= len(r) + 1
        shown += 1
    footer = f"showing {shown} of {total} {what}"
    if shown < len(lines):
        footer += f" (cut to the {max_tokens}-token observation budget)"
    text = "\n".join([*head, *rendered[:shown], footer])
    return text, [line.node_id for line in lines[:shown]]
