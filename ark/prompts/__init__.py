"""Versioned agent prompts, shipped as package files: `system_<version>.md` (e.g. system_v1.md).

A prompt is a `string.Template`: `$graph_name`, `$node_types`, `$relation_types` are filled from the graph.
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


def render(template: str, graph_name: str, node_types: list[str], relation_types: list[str]) -> str:
    """Fill a prompt template with a graph's name and its node/relation type vocabularies."""
    return string.Template(template).substitute(
        graph_name=graph_name,
        node_types=", ".join(node_types),
        relation_types=", ".join(relation_types),
    )


GRAPH_TOOLS = ("search_graph", "explore_neighbors")


def system_prompt(graph, version: str = "v1", tool_names: list[str] | None = None) -> str:
    """The system prompt for `graph` (a KnowledgeGraph) at prompt `version`.

    `tool_names`: the graph tools actually offered. When a tool ablation removes one (e.g. the
    "w/o Neighbors" setting), a closing note tells the model which tools this run has.
    """
    text = render(load_template(version), graph.name, list(graph.node_type_names), list(graph.relation_names))
    if tool_names is not None:
        missing = [t for t in GRAPH_TOOLS if t not in tool_names]
        if missing:
            text += (f"\nNote: in this run {', '.join(missing)} is not available; "
                     f"use only: {', '.join(tool_names)}.\n")
    return text
