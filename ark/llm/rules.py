"""The rule-based tool policy (``backbone=rules``): a free teacher that never sees gold.

`RulesPolicy` answers a chat request (messages + tool schemas) with the assistant reply a model would
send: tool calls of ``search_graph``, ``explore_neighbors``, ``select`` and ``finish``. It reads only
what a model reads: the question (the first user message), the tool schemas of the request (the node
types and relations of the graph, from the ``node_types`` and ``relations`` enums) and the tool
observations in the messages. It keeps no state between calls: each reply is worked out again from the
conversation, so every agent, query and graph can share one policy, and its trajectories, run
directories and SFT data are those of an LLM (`ark.llm.client.LLMClient` calls it in-process for
``provider: rules``).

The policy, step by step:

1. search the whole question (k 20), each phrase of it (the runs of words between function words, type
   and relation words and punctuation; k 5) and its head noun ("which X", "what X"; k 20);
2. read the answer's *anchors*, the shown nodes whose names the question spells out word for word (the
   longest first, no two overlapping), and the *asked type*: the first node type the question names
   that is not the label of an anchor ("the gene X") nor follows a possessive ("their phenotypes");
   when the question names none and no anchor covers it, the type most of the head noun's hits have
   (types named after a possessive left out). *Named* questions (anchors cover half the question's
   content words or more, or a third with two anchors) explore each anchor's neighbours of the asked
   type (with no type named: one list per relation the question names); *described* questions explore
   the top two hits of the whole question for the asked type, unless the asked type is the top hit's
   (then the hits are the answer; with ``explore_always`` a described question explores all the same,
   its top hits of another type or else its top hits, filtered by the asked type where there is one,
   and its answer lists the hits before what the exploration found);
3. check the best candidates (those on the shortest lists first) against each anchor they were not
   listed under (``explore_neighbors`` on the candidate, filtered by the anchor's type, ranked by its name);
4. select, best first: nodes next to more anchors, then linked to them by relations the question
   names, then of the asked type, then (next to two anchors or more) the more specific, with fewer
   neighbours of an anchor's type, then from shorter lists, then in the order shown; ``finish``.

With ``explain`` each reply opens with one line, the reading its calls follow from: at step 2 the nodes the
question names (name and id) or that it describes one, the type it asks, and so whether it explores or the
hits are the answer; before the checks, the named nodes; at the selection, the candidates next to every
named node. A student distilled from such replies writes the line before its own calls (its content); the
calls are the same as without it.

Every agent of a query takes the same calls (the sampling settings are not read). A step may hold many
calls (the first one up to ten searches, the third one checks of up to 40 candidates): the trajectories are longer
than a model's, in the same format.

    policy = RulesPolicy()
    reply = policy(messages, tools)     # {"content": "", "tool_calls": [{"id", "function": {...}}]}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

SEARCH, EXPLORE, SELECT, FINISH = "search_graph", "explore_neighbors", "select", "finish"
HEAD_MAJORITY = 0.6  # share of the head noun's hits one type needs to be taken as the asked type


@dataclass(frozen=True)
class RulesSettings:
    """How much the policy asks of the tools: k of each call, how many calls, how long the answer list.

    The defaults are the full teacher's (`backbone=rules`). A smaller setting keeps trajectories short
    enough for a small student's context (`backbone=rules-compact`: the teacher a SmolLM2 student is
    distilled from); each key is a backbone's ``extra_body.rules.<key>``."""

    question_k: int = 20  # hits of the whole question
    phrase_k: int = 5  # hits of each phrase
    head_k: int = 20  # hits of the head noun (the vote for the asked type)
    max_phrases: int = 8  # phrases searched on top of the question (0: the question and head noun only)
    neighbors_k: int = 100  # neighbours listed per exploration (the tool's own cap and token budget apply)
    check: int = 40  # candidates checked against the anchors that did not list them (0: no checking step)
    check_k: int = 5  # neighbours listed per check
    explore_hits: int = 2  # described questions: top hits explored
    max_anchors: int = 3
    select_n: int = 20  # ids selected
    head_search: bool = True  # search the head noun in step 1 (its hits vote for the asked type)
    explore_always: bool = False  # described questions explore even when the hits are the answer (listed first)
    explain: bool = False  # each reply opens with a line saying what the rules read and chose (the module doc)

    def __post_init__(self) -> None:
        for key, value in vars(self).items():
            if isinstance(self.__dataclass_fields__[key].default, bool):   # a switch
                if not isinstance(value, bool):
                    raise ValueError(f"bad setting in backbone.extra_body.rules: {key} must be true or false, "
                                     f"got {value!r}")
                continue
            floor = 0 if key in ("max_phrases", "check") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < floor:
                raise ValueError(f"bad setting in backbone.extra_body.rules: {key} must be a whole number "
                                 f"from {floor}, got {value!r}")

    @classmethod
    def of(cls, options: dict | None) -> "RulesSettings":
        """Settings from a backbone's ``extra_body.rules`` block; an unknown key is named with the valid ones."""
        options = dict(options or {})
        valid = [f for f in cls.__dataclass_fields__]
        bad = [k for k in options if k not in valid]
        if bad:
            raise ValueError(f"unknown key {bad[0]!r} in backbone.extra_body.rules; valid keys: {', '.join(valid)}")
        return cls(**options)

# English function words: phrases break at them (bar the ones names hold, `NAME_WORDS`)
STOPWORDS = frozenset("""
a an the of in on at to for from by with and or but nor not no is are was were be been being am do does
did done have has had having can could may might must shall should will would which what who whom whose
where when why how that this these those there here it its they them their theirs he she his her hers we
our ours you your yours i me my mine as than then so such both either neither each every all any some
also only very too more most less least other others own same just about above below among amongst
between into onto over under through during before after again further once ones one find list show give
tell
""".split())
NAME_WORDS = frozenset("of the a an in on to by for and with".split())  # function words inside names
WH_DETERMINERS = frozenset(("which", "what"))
POSSESSIVES = frozenset("their its whose his her our your".split())
_LINE = re.compile(r"^\[([^\]]+)\] (.*)$")
_TYPED = re.compile(r"^(.*?) \(([^()]+)\)(?= score=| \| |$)")
_TOTAL = re.compile(r"^showing \d+ of (\d+)", re.M)


def words(text: str) -> list[str]:
    """Lower-case alphanumeric words."""
    return re.findall(r"[a-z0-9]+", text.lower())


def _matches(word: str, token: str) -> bool:
    """Whether ``word`` is a form of ``token``: itself, a plural or a derived form sharing its stem."""
    if word == token:
        return True
    if len(token) >= 4 and word.startswith(token) and len(word) - len(token) <= 3:
        return True
    return len(token) >= 6 and len(word) >= len(token) - 1 and word[:len(token) - 1] == token[:-1]


def _norm(raw) -> int | str:
    """An id as observations show it, read back: a number where it is one."""
    return int(raw) if str(raw).lstrip("-").isdigit() else str(raw)


@dataclass
class Shown:
    """One node line of an observation."""

    id: int | str
    name: str
    type: str
    links: list[str] = field(default_factory=list)  # the relations on the line (explorations)


@dataclass
class Call:
    """One tool call of the conversation and what it showed."""

    name: str
    args: dict
    nodes: list[Shown]
    total: int | None


@dataclass
class Anchor:
    node: Shown
    span: tuple[int, int]  # word positions [start, end) in the question


@dataclass
class Candidate:
    """A node an anchor's exploration listed."""

    node: Shown
    position: int  # order of first listing
    shortest: int  # length of the shortest list it is on (the tool's count of neighbours)
    degree: float = float("inf")  # fewest neighbours of an anchor's type a check counted: the specific first
    next_to: set = field(default_factory=set)  # ids of the anchors it neighbours
    links: set = field(default_factory=set)  # (anchor id, relation) of those edges

    def add(self, anchor_id, relations) -> None:
        self.next_to.add(anchor_id)
        self.links.update((anchor_id, r) for r in relations)


class RulesPolicy:
    """The rule-based tool policy (see the module doc); call it with a request's messages and tools."""

    def __init__(self, settings: RulesSettings | None = None):
        self.settings = settings or RulesSettings()

    def __call__(self, messages: list[dict], tools: list[dict]) -> dict:
        return Reading(messages, tools, self.settings).reply()


class Reading:
    """One request, read: the question, the schema's vocabularies and the calls made so far."""

    def __init__(self, messages: list[dict], tools: list[dict], settings: RulesSettings | None = None):
        self.settings = settings or RulesSettings()
        self.question = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
        self.schemas = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools or []}
        self.types = self._enum(EXPLORE, "node_types") or self._enum(SEARCH, "node_types")
        self.relations = self._enum(EXPLORE, "relations")
        self.steps = self._calls(messages)
        self.words = words(self.question)

    # -- the request ---------------------------------------------------------------------------
    def _enum(self, tool: str, param: str) -> list[str]:
        prop = self.schemas.get(tool, {}).get("properties", {}).get(param, {})
        return list(prop.get("items", {}).get("enum", []) or [])

    def _id_type(self, tool: str, param: str) -> str:
        prop = self.schemas.get(tool, {}).get("properties", {}).get(param, {})
        return (prop.get("items", prop) or {}).get("type", "integer")

    def _calls(self, messages: list[dict]) -> list[list[Call]]:
        """The calls of each earlier step, with the nodes their observations showed."""
        results = {m.get("tool_call_id"): m.get("content") or "" for m in messages if m.get("role") == "tool"}
        steps = []
        for m in messages:
            if m.get("role") != "assistant":
                continue
            calls = []
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", {})
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = {}
                if not isinstance(args, dict):
                    args = {}
                if "node_id" in args:
                    args["node_id"] = _norm(args["node_id"])
                text = results.get(tc.get("id"), "")
                total = _TOTAL.search(text)
                calls.append(Call(fn.get("name", ""), args, self._nodes(text), int(total.group(1)) if total else None))
            steps.append(calls)
        return steps

    def _nodes(self, text: str) -> list[Shown]:
        out = []
        for line in text.splitlines():
            m = _LINE.match(line)
            if not m:
                continue
            rest = m.group(2)
            best = None
            for t in self.types or []:
                for end in (f" ({t}) score=", f" ({t}) | "):
                    pos = rest.find(end)
                    if pos >= 0 and (best is None or pos < best[0]):
                        best = (pos, t)
                if best is None and rest.endswith(f" ({t})"):
                    best = (len(rest) - len(t) - 3, t)
            if best is None:   # no type vocabulary in the schemas (type filters switched off): read the brackets
                guess = _TYPED.match(rest)
                if guess is None:
                    continue
                best = (len(guess.group(1)), guess.group(2))
            pos, t = best
            parts = rest[pos + len(t) + 3:].split(" | ")
            listed = [p.strip().removeprefix("-> ").removeprefix("<- ") for p in parts[1].split(", ")] \
                if len(parts) > 1 else []
            links = [r for r in self.relations if r in listed]
            out.append(Shown(_norm(m.group(1)), rest[:pos], t, links))
        return out

    # -- the question --------------------------------------------------------------------------
    def _token_words(self, names: list[str]) -> dict[str, str]:
        """word -> the vocabulary entry it comes from (function words left out)."""
        out = {}
        for n in names:
            for w in words(n):
                if w not in STOPWORDS and w not in out:
                    out[w] = n
        return out

    def type_of_word(self, w: str) -> str | None:
        for token, t in self._token_words(self.types).items():
            if _matches(w, token):
                return t
        return None

    def relations_named(self, skip: set[int] = frozenset()) -> list[str]:
        type_tokens = set(self._token_words(self.types))
        out = []
        for token, r in self._token_words(self.relations).items():
            if token in type_tokens or r in out:
                continue
            if any(_matches(w, token) for i, w in enumerate(self.words) if i not in skip):
                out.append(r)
        return out

    def phrases(self) -> list[str]:
        """The question's phrases: runs of words between function, type and relation words and
        punctuation (and the same runs joined across punctuation)."""
        rel_tokens = set(self._token_words(self.relations))
        pieces = re.findall(r"[A-Za-z0-9][\w'/-]*|[^\w\s]", self.question)
        out: list[str] = []
        for across_punct in (False, True):
            run: list[str] = []
            for p in pieces + ["."]:
                lw = p.lower()
                is_word = p[0].isalnum()
                breaks = (not is_word and not across_punct) or (is_word and (
                    (lw in STOPWORDS and lw not in NAME_WORDS) or self.type_of_word(lw) is not None
                    or any(_matches(lw, t) for t in rel_tokens))) or (not is_word and p in "?:;()[]\"")
                if breaks or p == ".":
                    while run and run[0].lower() in NAME_WORDS:
                        run.pop(0)
                    while run and run[-1].lower() in NAME_WORDS:
                        run.pop()
                    text = " ".join(run).replace(" ,", ",")
                    if run and text not in out:
                        out.append(text)
                    run = []
                elif is_word or p == ",":
                    run.append(p)
        return [p for p in out if words(p)][:self.settings.max_phrases]

    def head_noun(self) -> str | None:
        """The noun a question opening with an interrogative determiner asks for ("which X", "what X"),
        when that word is no function word; else None."""
        w = self.words
        if len(w) > 1 and w[0] in WH_DETERMINERS and w[1] not in STOPWORDS and not w[1].isdigit():
            return w[1]
        return None

    # -- reading the searches ------------------------------------------------------------------
    def anchors(self) -> list[Anchor]:
        """The shown nodes the question names word for word: longest first, no two overlapping."""
        qw = self.words
        found: dict = {}
        type_tokens = set(self._token_words(self.types))
        for call in self.steps[0] if self.steps else []:
            for node in call.nodes:
                nw = words(node.name)
                content = [w for w in nw if w not in STOPWORDS and w not in type_tokens]
                if not content or (len(nw) == 1 and len(nw[0]) < 3):
                    continue
                for i in range(len(qw) - len(nw) + 1):
                    if qw[i:i + len(nw)] == nw:
                        found.setdefault((i, i + len(nw)), node)
                        break
        taken: list[Anchor] = []
        for (s, e), node in sorted(found.items(), key=lambda kv: (kv[0][0] - kv[0][1], kv[0][0])):
            if all(e <= a.span[0] or s >= a.span[1] for a in taken) and all(a.node.id != node.id for a in taken):
                taken.append(Anchor(node, (s, e)))
        return sorted(taken, key=lambda a: a.span)[:self.settings.max_anchors]

    def content_positions(self) -> list[int]:
        type_tokens = set(self._token_words(self.types))
        rel_tokens = set(self._token_words(self.relations))
        return [i for i, w in enumerate(self.words) if w not in STOPWORDS and w not in type_tokens
                and not any(_matches(w, t) for t in rel_tokens) and self.type_of_word(w) is None]

    def named(self, anchors: list[Anchor]) -> bool:
        """Whether the question names its anchors rather than describes a node: they cover half its
        content words or more, or a third with two anchors or more."""
        content = self.content_positions()
        inside = {i for a in anchors for i in range(*a.span)}
        covered = sum(i in inside for i in content)
        return bool(anchors) and bool(content) and (covered * 2 >= len(content)
                                                    or len(anchors) > 1 and covered * 3 >= len(content))

    def asked_type(self, anchors: list[Anchor]) -> str | None:
        """The first node type the question names, outside anchors, not as an anchor's label, not after
        a possessive."""
        inside = {i for a in anchors for i in range(*a.span)}
        starts = {a.span[0] for a in anchors}
        for i, w in enumerate(self.words):
            if i in inside or w in STOPWORDS:
                continue
            t = self.type_of_word(w)
            if t is None:
                continue
            if i + 1 in starts or (i > 0 and self.words[i - 1] in POSSESSIVES):
                continue
            return t
        return None

    def possessed_types(self) -> set[str]:
        """The types the question names after a possessive ("their phenotypes"): the answer's
        neighbours, not the answer."""
        return {t for i, w in enumerate(self.words) if i > 0 and self.words[i - 1] in POSSESSIVES
                and (t := self.type_of_word(w)) is not None}

    def voted_type(self) -> str | None:
        """The type most of the head noun's hits have (types named after a possessive left out), when
        HEAD_MAJORITY of those hits have it."""
        head = self.head_noun()
        calls = [c for c in (self.steps[0] if self.steps else []) if c.name == SEARCH and c.args.get("query") == head]
        possessed = self.possessed_types()
        nodes = [n for n in calls[0].nodes if n.type not in possessed] if calls else []
        if not nodes:
            return None
        counts: dict[str, int] = {}
        for n in nodes:
            counts[n.type] = counts.get(n.type, 0) + 1
        t, c = max(counts.items(), key=lambda kv: kv[1])
        return t if c >= HEAD_MAJORITY * len(nodes) else None

    def question_hits(self) -> list[Shown]:
        first = self.steps[0] if self.steps else []
        return first[0].nodes if first and first[0].name == SEARCH else []

    # -- the plan ------------------------------------------------------------------------------
    def reply(self) -> dict:
        step = len(self.steps)
        if step == 0:
            searches = self._first_searches()
            return self._message([(SEARCH, self._search_args(q, k)) for q, k in searches],
                                 lambda: self._note_searches(searches))
        anchors = self.anchors()
        named = self.named(anchors)
        asked = self.asked_type(anchors) if named else (self.asked_type([]) or self.voted_type())
        if step == 1:
            calls = self._explorations(anchors, named, asked)
            if calls:
                return self._message(calls, lambda: self._note_reading(anchors, named, asked, calls))
        elif step == 2 and named and len(anchors) > 1:
            calls = self._checks(anchors)
            if calls:
                return self._message(calls, lambda: "Check the candidates against " + self._listing(anchors) + ".")
        ranked = self._ranking(anchors, named, asked)
        def note() -> str:
            return (self._note_reading(anchors, named, asked, []) if step == 1
                    else self._note_selection(anchors, named, asked, ranked))

        return self._message(([(SELECT, {"node_ids": ranked[:self.settings.select_n]})] if ranked else [])
                             + [(FINISH, {})], note)

    # -- what it says (``explain``): one line per reply, the reading its calls follow from ---------------
    def _note_searches(self, searches: list[tuple[str, int]]) -> str:
        head = self.head_noun()
        also = [q for q, _ in searches[1:]]
        if head in also:
            return f"Search the question, and \"{head}\": it is no node type."
        return "Search the question." + (f" Also: {'; '.join(also)}." if also else "")

    @staticmethod
    def _listing(anchors: list[Anchor]) -> str:
        return ", ".join(f"{a.node.name} [{a.node.id}]" for a in anchors)

    def _note_reading(self, anchors: list[Anchor], named: bool, asked: str | None, calls: list) -> str:
        """Step 2: the question named (which nodes) or described, the type it asks, and so the calls
        (none: the hits are the answer)."""
        hits = self.question_hits()
        wants = f"It asks for: {asked}." if asked else "No type asked."
        rels = list(dict.fromkeys(r for _, args in calls for r in args.get("relations") or []))
        by = (f" {asked}" if asked else "") + (f" {'/'.join(rels)}" if rels else "")
        if named:
            head = f"It names {self._listing(anchors)}. {wants}"
            return head + (f" Explore their{by} neighbours." if calls else " Select the hits.")
        head = f"Nothing named: it describes a node. {wants}"
        if calls:
            top = hits[0] if hits else None
            lead = f" Top hit [{top.id}] is {top.type}:" if top is not None else ""
            return head + lead + f" explore the hits for{by} neighbours."
        if asked and hits and hits[0].type == asked:
            return f"{head} Top hit is {asked}: the hits are the answer."
        return f"{head} The hits are the answer."

    def _note_selection(self, anchors: list[Anchor], named: bool, asked: str | None, ranked: list) -> str:
        """The last step: what comes first in the answer."""
        if named and len(anchors) > 1:
            everywhere = {c.node.id for c in self._candidates(anchors).values() if len(c.next_to) == len(anchors)}
            first = [i for i in ranked if i in everywhere][:3]
            if first:
                return f"Next to {self._listing(anchors)} at once: " + ", ".join(f"[{i}]" for i in first) + "."
            return "None is next to all of them: nearest first."
        kind = f"the {asked} nodes" if asked else "the nodes"
        return f"Select {kind} found, best first." if named else f"Select {kind} shown, explored first."

    def _first_searches(self) -> list[tuple[str, int]]:
        st = self.settings
        out = [(self.question, st.question_k)]
        head = self.head_noun()
        out += [(p, st.head_k if p == head else st.phrase_k) for p in self.phrases() if p != self.question]
        if st.head_search and head and self.type_of_word(head) is None and head not in {q for q, _ in out}:
            out.append((head, st.head_k))
        return out

    def _search_args(self, query: str, k: int) -> dict:
        return {"query": query, "k": k}

    def _explore_args(self, node: Shown, types: list[str] | None, relations: list[str] | None,
                      query: str | None = None, k: int | None = None) -> dict:
        args: dict = {"node_id": node.id}
        props = self.schemas.get(EXPLORE, {}).get("properties", {})
        if query and "query" in props:
            args["query"] = query
        if types and "node_types" in props:
            args["node_types"] = types
        if relations and "relations" in props:
            args["relations"] = relations
        if "k" in props:
            args["k"] = k or self.settings.neighbors_k
        return args

    def _explorations(self, anchors: list[Anchor], named: bool, asked: str | None) -> list:
        if EXPLORE not in self.schemas:
            return []
        if named:
            skip = {i for a in anchors for i in range(*a.span)}
            if asked is not None:
                return [(EXPLORE, self._explore_args(a.node, [asked], None)) for a in anchors]
            # no type named: one list per anchor and relation the question names (short lists are the
            # specific ones), or all of an anchor's neighbours when it names none
            rels = self.relations_named(skip) or [None]
            return [(EXPLORE, self._explore_args(a.node, None, [r] if r else None)) for a in anchors for r in rels]
        question_hits = self.question_hits()
        hits = [h for h in question_hits if asked is None or h.type != asked][:self.settings.explore_hits]
        if self.settings.explore_always:
            hits = hits or question_hits[:self.settings.explore_hits]
        elif asked is None or not hits or question_hits[0].type == asked:
            return []
        return [(EXPLORE, self._explore_args(h, [asked] if asked else None, None, self.question)) for h in hits]

    def _listed(self, anchors: list[Anchor]) -> dict:
        """id -> `Candidate`: every node the explorations of step 1 listed, anchors left out."""
        out: dict = {}
        anchor_ids = {a.node.id for a in anchors}
        for call in (self.steps[1] if len(self.steps) > 1 else []):
            if call.name != EXPLORE:
                continue
            size = call.total or len(call.nodes)
            for n in call.nodes:
                if n.id in anchor_ids:
                    continue
                c = out.setdefault(n.id, Candidate(n, position=len(out), shortest=size))
                c.add(call.args.get("node_id"), n.links)
                c.shortest = min(c.shortest, size)
        return out

    def _candidates(self, anchors: list[Anchor]) -> dict:
        """`_listed` with what the checks of step 3 found: a candidate's neighbours ranked by an anchor's
        name show whether it is next to that anchor, and how many neighbours of its type it has."""
        listed = self._listed(anchors)
        anchor_ids = {a.node.id for a in anchors}
        for call in (self.steps[2] if len(self.steps) > 2 else []):
            if call.name == EXPLORE and call.args.get("node_id") in listed:
                c = listed[call.args["node_id"]]
                c.degree = min(c.degree, call.total if call.total is not None else len(call.nodes))
                for n in call.nodes:
                    if n.id in anchor_ids:
                        c.add(n.id, n.links)
        return listed

    def _checks(self, anchors: list[Anchor]) -> list:
        listed = self._listed(anchors)
        order = sorted(listed.values(), key=lambda c: (-len(c.next_to), c.shortest, c.position))[:self.settings.check]
        return [(EXPLORE, self._explore_args(c.node, [a.node.type], None, a.node.name, k=self.settings.check_k))
                for c in order for a in anchors if a.node.id not in c.next_to]

    def _ranking(self, anchors: list[Anchor], named: bool, asked: str | None) -> list:
        hits = self.question_hits()
        if not named:
            explored = [n for step in self.steps[1:2] for c in step if c.name == EXPLORE for n in c.nodes]
            pool = hits + explored if self.settings.explore_always else explored + hits
            ordered = ([n for n in pool if asked is None or n.type == asked]
                       + [n for n in pool if asked is not None and n.type != asked])
            return list(dict.fromkeys(n.id for n in ordered))
        listed = self._candidates(anchors)
        skip = {i for a in anchors for i in range(*a.span)}
        rels = set(self.relations_named(skip))
        anchor_ids = {a.node.id for a in anchors}

        def key(c: Candidate):
            return (-len(c.next_to), -sum(r in rels for _, r in c.links), asked is not None and c.node.type != asked,
                    c.degree if len(c.next_to) > 1 else 0, c.shortest, c.position)

        ranked = [c.node.id for c in sorted(listed.values(), key=key)]
        rest = [h.id for h in hits if h.id not in anchor_ids and (asked is None or h.type == asked)]
        return list(dict.fromkeys(ranked + rest))

    def _ids_as_schema(self, tool: str, args: dict) -> dict:
        """Ids as the tool's schema takes them: numbers, or strings (a graph's own ids)."""
        out = dict(args)
        for param in ("node_id", "node_ids"):
            if param in out:
                as_str = self._id_type(tool, param) == "string"
                conv = (lambda v: str(v)) if as_str else (lambda v: int(v) if str(v).lstrip("-").isdigit() else v)
                out[param] = [conv(v) for v in out[param]] if isinstance(out[param], list) else conv(out[param])
        return out

    def _message(self, calls: list[tuple[str, dict]], note=None) -> dict:
        """The assistant reply of ``calls``; its text ``note()`` with ``explain`` (worked out only then)."""
        offered = [(name, args) for name, args in calls if name in self.schemas or name in (SELECT, FINISH)]
        if not offered:
            offered = [(FINISH, {})]
        offered = [(name, self._ids_as_schema(name, args)) for name, args in offered]
        step = len(self.steps)
        return {"role": "assistant", "content": note() if note is not None and self.settings.explain else "",
                "tool_calls": [{"id": f"call_{step}_{i}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}
                               for i, (name, args) in enumerate(offered)]}
