"""Versioned agent prompts, shipped as package files: `system_<version>.md` (e.g. system_v1.md).

A prompt is a `string.Template`: `$graph_name`, `$node_types`, `$relation_types` are filled from the graph,
`$tool_section` from the tool registry (`ark.tools`): one ``- `name` — guide`` entry per tool of
the default toolset (the paper's four) plus any other tool offered in this run, graph tools first.
Add a new version as a new file; never edit a version used in a published run.

    from ark.prompts import system_prompt, prompt_versions
    text = system_prompt(graph, "v1")
"""

from __future__ import annotations

import string
from importlib import resources


def prompt_versions() -> list[str]:
    """Versions available in the package, e.g. ["v1"]."""
    files = resources.files(__name__).iterdir()
    return sorted(f.name[len("system_") : -len(".md")] for f in files if f.name.startswith("system_") and f.name.endswith(".md"))


def load_template(version: str = "v1") -> str:
    """The raw text of system_<version>.md; ValueError lists the versions available."""
    versions = prompt_versions()
    if version not in versions:
        raise ValueError(f"prompt version {version!r} not found; choose one of {versions}")
    return resources.files(__name__).joinpath(f"system_{version}.md").read_text(encoding="utf-8")


def tool_section(tool_names: list[str] | None = None, toolset=None) -> str:
    """The prompt's tool list: each registered tool that the default `ToolConfig` offers, then the
    other offered ones (``tool_names``: the graph tools of this run; None: the default toolset).
    A default tool that an ablation removed stays listed; `system_prompt` adds a note naming it."""
    from ark.tools import ToolConfig, all_tools

    default = ToolConfig()
    offered = set(tool_names or ())
    shown = [t for t in all_tools("graph") if t.enabled(default) or t.name in offered]
    shown += all_tools("answer")
    return "\n".join(f"- `{t.name}` — {t.guide_text(toolset)}" for t in shown)


def render(template: str, graph_name: str, node_types: list[str], relation_types: list[str],
           tools: str = "") -> str:
    """Fill a prompt template with a graph's name, its node/relation type vocabularies and the tool section."""
    return string.Template(template).substitute(
        graph_name=graph_name,
        node_types=", ".join(node_types),
        relation_types=", ".join(relation_types),
        tool_section=tools,
    )


def system_prompt(graph, version: str = "v1", tool_names: list[str] | None = None, toolset=None) -> str:
    """The system prompt for `graph` (a KnowledgeGraph) at prompt `version`.

    `tool_names`: the graph tools actually offered; `toolset` (an `ark.tools.ToolSet`), when given,
    words the entries that depend on its settings (search_graph's search mode). When a tool ablation removes one of the default
    toolset (e.g. the "w/o Neighbors" setting), a closing note tells the model which tools this run has.
    """
    from ark.tools import ToolConfig, all_tools

    text = render(load_template(version), graph.name, list(graph.node_type_names), list(graph.relation_names),
                  tool_section(tool_names, toolset))
    if tool_names is not None:
        default = [t.name for t in all_tools("graph") if t.enabled(ToolConfig())]
        missing = [t for t in default if t not in tool_names]
        if missing:
            text += (f"\nNote: in this run {', '.join(missing)} is not available; "
                     f"use only: {', '.join(tool_names)}.\n")
    return text
