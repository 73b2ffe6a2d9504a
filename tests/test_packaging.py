"""pyproject.toml declares what ark/ imports: every third-party top-level import of the package (read
from the import statements themselves) maps to a declared distribution; the library's own modules need
only the core dependencies, ark/distill/ may use the `distill` extra, the process the local server
runs (ark/llm/llama_server.py) the `local` extra, and the encoders and vector indexes of dense search
(ark/search/embeddings.py, ark/search/vectors.py, imported lazily) the `dense` extra.

And the built package works on its own: a wheel built from the checkout carries conf/ (as ark/conf), and,
installed into a fresh virtual environment that sees the shared environment's packages but not the
checkout, its ``ark`` command answers ``--version``, ``search``, ``run`` and ``python -m experiments.run``
from a directory outside the checkout, keeping its caches in the user cache directory."""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

import ark

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


# ------------------------------------------------------------------ the built package, installed elsewhere
KG = REPO / "tests" / "data" / "tables_kg"
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "ark", "experiments", "conf")


def _sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv, wheel, env, cwd): the wheel built from a copy of the checkout's build inputs (so the build
    writes nothing into the checkout), installed with pip into a fresh venv whose only link to the shared
    environment is a .pth line naming its site-packages (its .pth files, the editable ark among them, are
    not run); env has no PYTHONPATH and no ARK_HOME; cwd is an empty folder outside the checkout."""
    tmp = tmp_path_factory.mktemp("installed")
    src = tmp / "src"
    src.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in BUILD_INPUTS:
        (shutil.copytree(REPO / name, src / name, ignore=skip) if (REPO / name).is_dir()
         else shutil.copy2(REPO / name, src / name))
    _sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(tmp / "dist"), "."], cwd=src)
    wheel = next((tmp / "dist").glob("ark-*.whl"))
    venv = tmp / "venv"
    _sh([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(_sh([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    shared = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "shared-env.pth").write_text("".join(f"{d}\n" for d in shared))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ARK_HOME")}
    # without PYTHONPATH: a checkout on it (with its ark.egg-info) would count as ark installed already
    _sh([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        env=env)
    env.update(HOME=str(tmp / "home"), XDG_CACHE_HOME=str(tmp / "xdg"), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    cwd = tmp / "elsewhere"
    cwd.mkdir()
    return venv, wheel, env, cwd


@pytest.mark.packaging
def test_the_installed_package_finds_its_configs_from_any_directory(installed):
    venv, wheel, env, cwd = installed
    with zipfile.ZipFile(wheel) as z:
        packed = {n.removeprefix("ark/") for n in z.namelist() if n.startswith("ark/conf/")}
    assert packed == {str(p.relative_to(REPO)) for p in (REPO / "conf").rglob("*.yaml")}   # every config
    assert "conf/config.yaml" in packed and "conf/hydra/launcher/slurm.yaml" in packed

    probe = ("import ark, experiments, ark.config.location as l, ark.home as h, json; print(json.dumps("
             "[ark.__file__, experiments.__file__, str(l.conf_dir()), str(h.checkout()), str(h.ark_home())]))")
    found = json.loads(_sh([str(venv / "bin" / "python"), "-c", probe], env=env, cwd=cwd).stdout)
    site = str(venv / "lib")
    assert found[0].startswith(site) and found[1].startswith(site)          # not the checkout's copies
    assert found[2] == str(Path(found[0]).parent / "conf") and found[3] == "None"
    assert found[4] == env["XDG_CACHE_HOME"] + "/ark"                       # caches in the user cache dir

    ark_cmd = str(venv / "bin" / "ark")
    assert _sh([ark_cmd, "--version"], env=env, cwd=cwd).stdout.strip() == f"ark {ark.__version__}"

    # ark search: the observation the checkout's own command prints for the same graph
    searched = _sh([ark_cmd, "search", "sparse retrieval", "--graph", str(KG), "-k", "2"], env=env, cwd=cwd).stdout
    here = _sh([sys.executable, "-m", "ark", "search", "sparse retrieval", "--graph", str(KG), "-k", "2",
                "--root", str(cwd.parent / "checkout-data")], cwd=REPO,
               env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert searched == here and searched.splitlines()[1].startswith("[P1] Sparse Retrieval Revisited (paper)")
    caches = sorted(p.name for p in (Path(env["XDG_CACHE_HOME"]) / "ark" / "cache").iterdir())
    assert caches == sorted(p.name for p in (cwd.parent / "checkout-data" / "cache").iterdir())

    # ark run: composed from the packaged conf/, a BM25 run over the tables graph's test split
    runs = cwd.parent / "runs"
    _sh([ark_cmd, "run", "graph=tables", f"graph.path={KG}", "retriever=bm25", f"paths.runs={runs}", "progress=false"],
        env=env, cwd=cwd)
    run_dir = runs / "default" / "tables_kg" / "bm25_test"
    from ark.data.tables.source import TablesSource

    n_test = len(TablesSource(KG, root=cwd.parent / "checkout-data").queries().split("test"))
    assert len((run_dir / "predictions.jsonl").read_text().splitlines()) == n_test
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "complete" and metrics["n"] == n_test

    # the experiments entry points compose the same configs
    job = _sh([str(venv / "bin" / "python"), "-m", "experiments.run", "--cfg", "job", "--resolve", "graph=demo"], env=env, cwd=cwd).stdout
    assert f"data: {env['XDG_CACHE_HOME']}/ark" in job and "name: demo" in job
    assert not any(cwd.iterdir())                                           # nothing left where it ran
