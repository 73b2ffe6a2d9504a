"""The registry of agent tools: every tool the LLM can call is one `Tool` object, declared in a module of
its own and found here.

A `Tool` holds its name (the name the LLM sees), description, parameters (JSON schemas), handler, its
place in every tool list and the ablation switches that remove it or its parameters. Everything else
reads names from here: the OpenAI ``tools`` list (`ark.tools.toolset.ToolSet`, `ark.agent.Agent`), the
prompt's tool section (`ark.prompts`), the agent's error messages, the runner's tool counts
(``metrics.json``, ``per_query.csv``, ``trajectory_stats.csv``), the figures' tool shares, the W&B dashboard.

Roles say what a handler ``handler(target, args) -> ToolResult`` acts on: a ``"graph"`` tool runs on the
graph, its target the `ark.tools.toolset.ToolSet` (``search_graph``, ``explore_neighbors``); an
``"answer"`` tool acts on the agent's answer list, its target the trajectory's
`ark.tools.answer.AnswerState` (``select``, ``finish``). The agent calls both kinds the same way.

Discovery: the first read of the registry imports every module of the `ark.tools` package and registers
the `Tool` each one declares as ``TOOL``; `discover` does the same for another package. Tools are listed
by ``Tool.order``, then in registration order. `register` adds a tool made anywhere else.

Switches: ``Tool.switch`` / ``Param.switch`` name a boolean of `ark.tools.toolset.ToolConfig` (a field such
as ``neighbors``, or a key of its ``switches`` dict for tools added later); False removes the tool or the
parameter from the schema, and a call using it is then rejected like any unknown argument. A switch
nobody set is the tool's ``default_on``: True (offered at once) unless the tool is opt-in
(``default_on=False``, e.g. ``find_paths``: only a run whose ``ToolConfig.switches`` turns it on offers
it). The default toolset (`ark.tools.toolset.default_graph_tool_names`) is what a run offers with no switch set: the
paper's two graph tools, and the prompt, the run statistics and the figures of such a run name no
opt-in tool. The recipe for a new tool is in `ark.tools`.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

ROLES = {"graph": "toolset", "answer": "answer"}  # role -> what its handler acts on (the target)
PACKAGE = "ark.tools"  # the built-in tools: every module of this package that declares a TOOL


@dataclass(frozen=True)
class Param:
    """One tool parameter. ``schema``/``description`` may be callables of the `ToolSet` (their values
    depend on the graph, e.g. type-name enums, or on the configured k)."""

    name: str
    schema: dict | Callable[[Any], dict]
    description: str | Callable[[Any], str]
    required: bool = False
    switch: str | None = None  # ToolConfig switch that removes this parameter when False
    clause: str = ""  # appended to the tool's description while this parameter is offered
    shown_ids: bool = False  # its values are ids of nodes shown earlier (AgentConfig.constrain_ids lists them)

    def resolve(self, toolset) -> tuple[dict, str]:
        schema = self.schema(toolset) if callable(self.schema) else self.schema
        desc = self.description(toolset) if callable(self.description) else self.description
        return schema, desc


@dataclass(frozen=True)
class Tool:
    """One agent tool: what the LLM sees, what runs it, what removes it."""

    name: str
    description: str | Callable[[Any], str]  # what the LLM reads (or a callable of the ToolSet);
    # `Param.clause`s and ``description_end`` are appended
    params: tuple[Param, ...] = ()
    handler: Callable[[Any, dict], Any] | None = None  # (target, args) -> ToolResult; the target: see ROLES
    switch: str | None = None  # ToolConfig switch that removes the tool when False
    role: str = "graph"  # "graph" (runs on the ToolSet) or "answer" (acts on the agent's AnswerState)
    # Figure 3 pools tool calls by kind: "text" (global search) and "relational" (neighborhood), the two
    # kinds of STaRK queries it sets them beside; any other kind is shown under its own name
    kind: str = "other"
    guide: str | Callable[[Any], str] = ""  # its prompt entry ("- `name` — guide"), or a callable of the ToolSet
    description_end: str = ""  # appended after the parameter clauses
    closed: bool = True  # the schema forbids unknown arguments (additionalProperties: false)
    order: int = 100  # its place in every tool list (schema, prompt, statistics); ties: registration order
    default_on: bool = True  # offered while no ToolConfig sets its switch; False: opt-in (a run turns it on)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Tool {self.name!r}: role={self.role!r}; choose one of {list(ROLES)}")
        if self.handler is None:
            raise ValueError(f"Tool {self.name!r}: a {self.role} tool needs a handler({ROLES[self.role]}, args)")

    def guide_text(self, toolset=None) -> str:
        return self.guide(toolset) if callable(self.guide) else self.guide

    def offered_params(self, config) -> tuple[Param, ...]:
        """The parameters the ``config`` (a ToolConfig) leaves in."""
        return tuple(p for p in self.params if p.switch is None or config.switch(p.switch))

    def enabled(self, config) -> bool:
        return self.switch is None or config.switch(self.switch)

    def openai(self, toolset=None, config=None) -> dict:
        """The OpenAI ``tools`` entry of this tool for a tool set (its graph and ToolConfig)."""
        config = config if config is not None else getattr(toolset, "config", None)
        params = self.offered_params(config) if config is not None else self.params
        props = {}
        desc = self.description(toolset) if callable(self.description) else self.description
        for p in params:
            schema, pdesc = p.resolve(toolset)
            props[p.name] = {**schema, "description": pdesc}
            desc += p.clause
        desc += self.description_end
        required = [p.name for p in params if p.required]
        parameters: dict = {"type": "object", "properties": props}
        if self.closed or required:
            parameters["required"] = required
        if self.closed:
            parameters["additionalProperties"] = False
        return {"type": "function", "function": {"name": self.name, "description": desc, "parameters": parameters}}


_REGISTRY: dict[str, Tool] = {}
_loaded = False


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        discover(PACKAGE)


def discover(package: str = PACKAGE) -> list[Tool]:
    """Import every module of ``package`` (a dotted name) and register the `Tool` each one declares as
    ``TOOL``; returns the tools registered, in module-name order. Modules without ``TOOL`` (the registry,
    the tool set) are imported and skipped. Run once for `ark.tools` on the first read of the registry."""
    pkg = importlib.import_module(package)
    found = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        tool = getattr(importlib.import_module(f"{package}.{info.name}"), "TOOL", None)
        if isinstance(tool, Tool):
            found.append(register(tool))
    return found


def register(tool: Tool, *, replace: bool = False) -> Tool:
    """Add ``tool``; a second tool of the same name is an error unless ``replace``."""
    if tool.name in _REGISTRY and not replace and _REGISTRY[tool.name] is not tool:
        raise ValueError(f"a tool named {tool.name!r} is already registered; pass replace=True to replace it")
    _REGISTRY[tool.name] = tool
    return tool


def unregister(name: str) -> None:
    _load_builtin()
    if name not in _REGISTRY:
        raise KeyError(f"no tool named {name!r}; registered: {', '.join(_REGISTRY)}")
    del _REGISTRY[name]


@contextlib.contextmanager
def registered(tool: Tool) -> Iterator[Tool]:
    """Register ``tool`` for the duration of a ``with`` block (tests, notebooks)."""
    _load_builtin()
    register(tool)
    try:
        yield tool
    finally:
        _REGISTRY.pop(tool.name, None)


def all_tools(role: str | None = None) -> list[Tool]:
    """Registered tools by ``order``, then registration order (the paper's: search_graph,
    explore_neighbors, select, finish), optionally of one role."""
    _load_builtin()
    if role is not None and role not in ROLES:
        raise ValueError(f"role={role!r}; choose one of {list(ROLES)}")
    ordered = sorted(_REGISTRY.values(), key=lambda t: t.order)  # stable: ties keep registration order
    return [t for t in ordered if role is None or t.role == role]


def get(name: str) -> Tool:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no tool named {name!r}; registered: {', '.join(_REGISTRY)}") from None


def names(role: str | None = None) -> list[str]:
    """Names of the registered tools (of one role)."""
    return [t.name for t in all_tools(role)]


def graph_tool_names() -> list[str]:
    """Names of the registered graph tools: the columns of tool counts in run statistics."""
    return names("graph")


def switch_default(name: str) -> bool:
    """The value of switch ``name`` when no ToolConfig sets it: the ``default_on`` of the tool it
    switches (True for a parameter's switch or a name no tool reads)."""
    return all(t.default_on for t in all_tools() if t.switch == name)


def names_of_kind(kind: str) -> list[str]:
    """Graph tools of one Figure 3 kind, e.g. "relational" (neighborhood calls, Figure 5)."""
    return [t.name for t in all_tools("graph") if t.kind == kind]


def kinds() -> dict[str, str]:
    """Graph tool name -> its Figure 3 kind."""
    return {t.name: t.kind for t in all_tools("graph")}


def switch_names() -> list[str]:
    """Every switch a registered tool or parameter reads."""
    out = [t.switch for t in all_tools() if t.switch] + [p.switch for t in all_tools() for p in t.params if p.switch]
    return list(dict.fromkeys(out))
