"""Where Hydra and the entry points may live, read from the import statements themselves (``ast``):
only ``ark/config/`` imports hydra or omegaconf; nothing in ``ark/`` or ``scripts/`` imports
``experiments``; ``experiments/`` imports only ``ark`` (so no cycle among its scripts) and holds thin
entry points; every ``_target_`` of ``conf/`` names an importable object of ``ark``; a library module
has no ``main`` of its own (the ``ark`` command has the verbs; the llama.cpp server process that
`ark.llm.local_server` launches keeps its entry point)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
ARK = REPO / "ark"
HYDRA_LAYER = ARK / "config"
PROCESS_ENTRY_POINTS = {ARK / "cli" / "main.py", ARK / "llm" / "llama_server.py", ARK / "__main__.py"}


def _imports(path: Path) -> set[str]:
    """Absolute module names imported anywhere in ``path`` (lazy imports inside functions count)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def _top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


def test_only_the_hydra_layer_imports_hydra():
    users = {f.relative_to(REPO).as_posix() for f in ARK.rglob("*.py") if _top(_imports(f)) & {"hydra", "omegaconf"}}
    assert users and all(u.startswith("ark/config/") for u in users), sorted(users)
    assert "ark/config/compose.py" in users


def test_library_and_scripts_never_import_the_entry_scripts():
    for f in [*ARK.rglob("*.py"), *(REPO / "scripts").glob("*.py")]:
        assert "experiments" not in _top(_imports(f)), f


def test_entry_scripts_import_only_the_library_and_stay_thin():
    scripts = sorted((REPO / "experiments").glob("*.py"))
    assert {f.stem for f in scripts} == {"__init__", "run", "diagnose", "embed", "collect", "distill"}
    for f in scripts:
        assert "experiments" not in _top(_imports(f)), f          # no script imports another
        assert len(f.read_text().splitlines()) <= 100, f
        tree = ast.parse(f.read_text())
        assert ast.get_docstring(tree), f
        assert [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))] in ([], ["main"]), f


def _targets(obj) -> list[str]:
    if isinstance(obj, dict):
        return [v for k, v in obj.items() if k == "_target_"] + [t for v in obj.values() for t in _targets(v)]
    if isinstance(obj, list):
        return [t for v in obj for t in _targets(v)]
    return []


def test_every_target_in_conf_names_an_object_of_ark():
    found = {}
    for f in sorted((REPO / "conf").rglob("*.yaml")):
        for target in _targets(yaml.safe_load(f.read_text()) or {}):
            found[target] = f.relative_to(REPO).as_posix()
    assert "ark.config.retrievers.build_ark" in found and len(found) > 10
    for target, where in found.items():
        assert target.startswith("ark."), (where, target)
        module, _, name = target.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name)), (where, target)


def test_library_modules_have_no_main_of_their_own():
    for f in ARK.rglob("*.py"):
        if f in PROCESS_ENTRY_POINTS:
            continue
        tree = ast.parse(f.read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "main" not in names, f
        guards = [n for n in tree.body if isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
                  and isinstance(n.test.left, ast.Name) and n.test.left.id == "__name__"]
        assert not guards, f"{f}: an `if __name__ == ...` block"
