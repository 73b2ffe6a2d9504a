"""pyproject.toml declares what ark/ imports: every third-party top-level import of the package (read
from the import statements themselves) maps to a declared distribution; the library's own modules need
only the core dependencies, ark/distill/ may use the `distill` extra, the process the local server
runs (ark/llm/llama_server.py) the `local` extra, and the encoders and vector indexes of dense search
(ark/search/embeddings.py, ark/search/vectors.py, imported lazily) the `dense` extra."""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTRA_PATHS = {"distill": [REPO / "ark" / "distill"], "local": [REPO / "ark" / "llm" / "llama_server.py"],   # may import an extra's
               "dense": [REPO / "ark" / "search" / "embeddings.py", REPO / "ark" / "search" / "vectors.py"]}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str, set[str]]:
    """{"core": names, <extra>: names} of pyproject's requirements (normalized distribution names)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {"core": project["dependencies"], **project["optional-dependencies"]}
    return {g: {_norm(re.match(r"[A-Za-z0-9_.-]+", r.strip()).group(0)) for r in reqs} for g, reqs in groups.items()}


def _imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports in ``path`` (anywhere in the file: lazy ones count)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return {m for m in out if m not in sys.stdlib_module_names and m not in ("ark", "experiments", "__future__")}


@functools.cache
def _installed() -> dict[str, list[str]]:
    return md.packages_distributions()


def _distributions(module: str, declared: set[str]) -> set[str]:
    """The distributions that provide ``module``: from the installed packages' own metadata, else (an
    extra not installed in this environment) a declared distribution of the same name or of that name
    plus a suffix (llama_cpp: llama-cpp-python, faiss: faiss-cpu)."""
    found = {_norm(d) for d in _installed().get(module, [])}
    name = _norm(module)
    return found or {d for d in declared if d == name or d.startswith(name + "-")}


def test_every_third_party_import_of_ark_is_declared():
    groups = _declared()
    everything = set().union(*groups.values())
    files = sorted((REPO / "ark").rglob("*.py"))
    assert len(files) > 20
    seen, missing = set(), []
    for f in files:
        allowed = set(groups["core"])
        for extra, paths in EXTRA_PATHS.items():
            if any(f == path or path in f.parents for path in paths):
                allowed |= groups[extra]
        for module in sorted(_imports(f)):
            seen.add(module)
            dists = _distributions(module, everything)
            if not dists & allowed:
                where = "core dependencies" if allowed == groups["core"] else "core or its extra's dependencies"
                missing.append(f"{f.relative_to(REPO)} imports {module!r} (distribution "
                               f"{', '.join(sorted(dists)) or 'unknown: not installed here'}), not in pyproject's {where}")
    assert not missing, "\n".join(missing)
    # the check reads real imports: the heavy hitters are among them
    assert {"numpy", "pyarrow", "numba", "bm25s", "hydra", "yaml", "mcp", "transformers"} <= seen


def test_the_checker_catches_an_undeclared_import(tmp_path):
    f = tmp_path / "mod.py"
    f.write_text("import os\nimport numpy as np\n\ndef later():\n    from yaml import safe_load\n    import not_a_declared_pkg.sub\n")
    assert _imports(f) == {"numpy", "yaml", "not_a_declared_pkg"}
    core = _declared()["core"]
    assert _distributions("yaml", core) == {"pyyaml"} and "pyyaml" in core
    assert not _distributions("not_a_declared_pkg", core)
