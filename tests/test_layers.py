"""The import contract of `ark/`: the package is built in layers and imports only go down.

Read from the import statements themselves (``ast``; imports inside functions count), so a new module
that reaches up a layer, or two modules that import each other, fail here before anyone reads the
diagram. The layers, lowest first (a module may import its own layer and the ones below):

    ark.atomic, ark.logs, ark.fusion,      mechanisms with no ark imports of their own;
    ark.coalesce                           (writes of one turn of the event loop done as one)
    ark.home                               where the data lives (ARK_HOME)
    ark.cost                               prices, ledgers, the spending cap, the forecast's arithmetic
    ark.llm, ark.data                      LLM clients; graphs and their sources
    ark.search, ark.trajectory             BM25, vectors, encoders, search modes; step records
    ark.observation, ark.retriever         observation text; what a retriever is and returns
    ark.tools, ark.baselines               the agent's tools; the baseline retrievers
    ark.prompts                            system prompts (their tool section reads the registry)
    ark.agent                              the loop and ARKRetriever
    ark.analysis                           metrics, attribution, reachability, paired statistics
    ark.run                                the runner, run directories, records, shards, loggers, summaries
    ark.report                             Table 1, figures, the comparison of two runs, the viewer
    ark.distill                            teacher trajectories -> student
    ark.config                             the Hydra layer: conf/ -> a checked, built run
    ark.cli, ark.__main__                  the `ark` command and the MCP server
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARK = REPO / "ark"
LAYERS = [
    ("ark.atomic", "ark.logs", "ark.fusion", "ark.coalesce", "ark.home"),
    ("ark.cost",),
    ("ark.llm", "ark.data"),
    ("ark.search", "ark.trajectory"),
    ("ark.observation", "ark.retriever"),
    ("ark.tools", "ark.baselines"),
    ("ark.prompts",),
    ("ark.agent",),
    ("ark.analysis",),
    ("ark.run",),
    ("ark.report",),
    ("ark.distill",),
    ("ark.config",),
    ("ark.cli", "ark.__main__"),
]


def _module(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _part(module: str) -> str | None:
    """The layer member a module belongs to (``ark.data.demo.queries`` -> ``ark.data``)."""
    for layer in LAYERS:
        for member in layer:
            if module == member or module.startswith(member + "."):
                return member
    return None


def _level(member: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if member in layer)


def _ark_imports(path: Path, root: Path = REPO) -> set[str]:
    """The ``ark.*`` modules ``path`` imports (``from ark.x import y`` counts ``ark.x.y`` when that is a module)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "ark"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "ark":
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                is_module = (root / (sub.replace(".", "/") + ".py")).exists() or (root / sub.replace(".", "/")).is_dir()
                out.add(sub if is_module else node.module)
    return out


def _graph(root: Path = REPO) -> dict[str, set[str]]:
    return {_module(f, root): _ark_imports(f, root) for f in (root / "ark").rglob("*.py")}


def upward_imports(root: Path = REPO) -> list[str]:
    up = []
    for module, imports in _graph(root).items():
        if module == "ark" or _part(module) is None:
            continue
        here = _level(_part(module))
        for target in imports:
            member = _part(target)
            if member is not None and _level(member) > here:
                up.append(f"{module} imports {target} (layer {_level(member)} > {here})")
    return sorted(up)


def cycles(root: Path = REPO) -> list[str]:
    full = _graph(root)
    graph = {m: {t for t in ts if t in full and t != m} for m, ts in full.items()}
    state: dict[str, int] = {}
    found = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                found.append(" -> ".join(path[path.index(t):] + [t]))
            elif t not in state:
                visit(t, path + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


def test_every_module_of_ark_has_a_layer():
    assert [m for m in _graph() if m != "ark" and _part(m) is None] == []


def test_imports_only_go_down():
    assert upward_imports() == []


def test_no_modules_import_each_other_in_a_circle():
    assert cycles() == []


def test_the_contract_sees_a_lazy_upward_import_and_a_circle(tmp_path):
    pkg = tmp_path / "ark"
    for rel, text in {"__init__.py": "", "data/__init__.py": "", "run/__init__.py": "",
                      "data/graph.py": "def f():\n    from ark.run import runner\n",
                      "run/runner.py": "from ark.run.records import x\n",
                      "run/records.py": "import ark.run.runner\n"}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    assert upward_imports(tmp_path) == ["ark.data.graph imports ark.run.runner (layer 9 > 2)"]
    assert cycles(tmp_path) == ["ark.run.runner -> ark.run.records -> ark.run.runner"]
