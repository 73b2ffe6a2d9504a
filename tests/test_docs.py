"""The docs cannot rot: every shell command of README.md, CONTRIBUTING.md and docs/ is run, run against the
scripted server, parsed by the real parsers, or marked as not run with a reason (tests.helpers.doc_commands).

A renamed key, verb, option, make target or file fails here. `python -m tests.helpers.doc_commands` prints
the counts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import doc_commands as dc
from tests.helpers.paths import DEMO_ROOT, REPO

COMMANDS, PROBLEMS = dc.commands()
RUN_FILES = sorted({c.file for c in COMMANDS if c.mode in ("run", "scripted")})
SHARED = ("experiments", "scripts", "conf", "tests", "notebooks")   # what a command run from a checkout sees


def test_every_block_is_marked_and_every_command_placed():
    assert PROBLEMS == []
    assert all(c.mode in dc.MODES for c in COMMANDS)
    assert all(c.reason for c in COMMANDS if c.mode == "not run"), "a not-run block must say why"
    n = dc.counts(COMMANDS)
    assert n["run"] + n["scripted"] >= 10 and n["check"] >= 50, n   # the docs' commands were found at all


def test_the_marker_reader_places_each_kind(tmp_path):
    """The reader finds markers, continuations, comments and inline commands, and flags an unmarked block."""
    doc = tmp_path / "page.md"
    doc.write_text("Run `ark search x --graph demo` or `ark.config.evaluation`.\n\n"
                   "<!-- doc-test: not run: needs a GPU -->\n```bash\nscripts/gpu_check.sh \\\n  --dry-run  # all\n```\n\n"
                   "```bash\nark build\n```\n\n```\nark build --graph demo\n```\n")
    cmds, problems = dc.commands([doc])
    assert [(c.mode, c.text, c.kind) for c in cmds] == [
        ("not run", "scripts/gpu_check.sh    --dry-run", "shell"), ("check", "ark search x --graph demo", "inline")]
    assert cmds[0].reason == "needs a GPU"
    assert len(problems) == 2 and "without a <!-- doc-test" in problems[0] and "unlabelled" in problems[1]


@pytest.mark.parametrize("text, fails", [
    ("python experiments/run.py graph=demo lmit=3", "lmit"),
    ("python experiments/run.py graph=demo retriever=bm25", None),
    ("ark run -m graph=demo seed=0,1", None),
    ("ark neighbors 7 --graph demo --relaton x", "ark does not parse"),
    ("make no-such-target", "no make target"),
    ("make reproduce-table1 ARGS=\"backbone=gpt-4.1 limt=2\"", "limt"),
    ("python -m ark.no_such_module", "no module"),
    ("python scripts/no_such_script.py", "no file"),
])
def test_the_checker_refuses_what_would_fail(text, fails):
    problem = dc.check_problem(dc.words_of(text))
    assert (problem is None) if fails is None else (problem is not None and fails in problem), problem


def _parsed():
    return [c for c in COMMANDS if c.kind in ("shell", "inline") and c.mode in ("check", "not run")]


@pytest.mark.parametrize("cmd", _parsed(), ids=lambda c: f"{c.file}:{c.line}")
def test_a_command_that_is_not_run_still_parses(cmd):
    problem = dc.check_problem(dc.words_of(cmd.text))
    assert problem is None, f"{cmd.file}:{cmd.line}: `{cmd.text}`: {problem}"


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.kind == "override"], ids=lambda c: f"{c.file}:{c.line}")
def test_a_setting_named_in_the_text_exists(cmd):
    """`search.setup.index_kind=hnsw` in a sentence is a key a run takes, with a value it takes."""
    problem = dc.override_problem(cmd.text)
    assert problem is None, f"{cmd.file}:{cmd.line}: {problem}"


@pytest.mark.parametrize("span, fails", [
    ("build_embeddings=false", "closest is"),              # the short form: not a key
    ("retriever.build.build_embeddings=false", None),     # a key of retriever=dense and =hybrid
    ("search=nosuch", "nosuch"),
    ("logger.mode=online|offline|disabled", None),
    ("shard=I/N", None),
])
def test_the_setting_checker_refuses_what_would_fail(span, fails):
    problem = dc.override_problem(span)
    assert (problem is None) if fails is None else (problem is not None and fails in problem), problem


def test_scripts_parse_their_arguments_as_written():
    calls = dc.script_invocations(COMMANDS)
    assert calls, "no script call found in the docs"
    proc = subprocess.run([sys.executable, "-m", "tests.helpers.doc_scripts", json.dumps([a for _, a in calls])],
                          cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO), "WANDB_MODE": "offline"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(calls), proc.stdout[-2000:]
    bad = [f"{c.file}:{c.line}: {r['problem']}" for (c, _), r in zip(calls, results) if r["problem"]]
    assert bad == []


def _sandbox(tmp_path: Path) -> Path:
    """A directory a command runs from as if from the checkout: its code and configs linked in, and a data
    root whose STaRK-format files and graph caches are the test data root's (the demo graph built once)
    but whose LLM cache is its own, so a scripted command really asks the server; everything a command
    writes lands here."""
    box = tmp_path / "checkout"
    (box / "data" / "cache").mkdir(parents=True)
    for name in SHARED:
        if (REPO / name).exists():
            (box / name).symlink_to(REPO / name)
    (box / "data" / "stark").symlink_to(DEMO_ROOT / "stark")
    for entry in (DEMO_ROOT / "cache").iterdir():
        if entry.name != "llm":
            (box / "data" / "cache" / entry.name).symlink_to(entry)
    return box


def _env(box: Path, extra: dict[str, str]) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    return {**env, "PATH": bin_dir + os.pathsep + env.get("PATH", ""), "PYTHONPATH": str(REPO),
            "WANDB_MODE": "offline", "ARK_HOME": str(box / "data"), **extra}


def _run(cmd: dc.Command, box: Path, env: dict[str, str]) -> None:
    if cmd.kind == "python":
        argv = [sys.executable, "-c", cmd.text]
    else:
        argv = ["bash", "-c", cmd.text.replace("python ", f"{sys.executable} ", 1)
                if cmd.text.startswith("python ") else cmd.text]
    proc = subprocess.run(argv, cwd=box, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"{cmd.file}:{cmd.line}: `{cmd.text[:200]}` exited {proc.returncode}\n"
                                  f"{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}")


@pytest.mark.commands
@pytest.mark.parametrize("file", RUN_FILES)
def test_the_commands_of_a_page_run_as_written(file, tmp_path, demo_root):
    """Each page's runnable blocks, in order, from one scratch directory (a block may use what an earlier
    one wrote); `scripted` blocks against the scripted server as the OpenAI endpoint."""
    from ark.data.sources import DemoSource
    from tests.helpers.policies import ark_like
    from tests.helpers.scripted_server import ScriptedServer

    DemoSource(root=demo_root).graph()   # built once in the test data root, linked into the scratch root
    box = _sandbox(tmp_path)
    cmds = [c for c in COMMANDS if c.file == file and c.mode in ("run", "scripted")]
    with ScriptedServer(responder=ark_like) as server:
        scripted = _env(box, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-doc-test"})
        plain = _env(box, {})
        for cmd in cmds:
            _run(cmd, box, scripted if cmd.mode == "scripted" else plain)
        if any(c.mode == "scripted" for c in cmds):
            assert server.calls > 0, f"{file}: no scripted command asked the server anything"


def test_every_module_of_ark_is_in_the_layout_page():
    text = (REPO / "docs" / "layout.md").read_text()
    tree = text[text.index("```"):]
    missing = []
    for f in sorted((REPO / "ark").rglob("*.py")):
        if f.name == "__init__.py" or "__pycache__" in f.parts:
            continue
        if not re.search(rf"(?<![\w.]){re.escape(f.name)}(?!\w)", tree) and not re.search(
                rf"(?<![\w.]){re.escape(f.stem)}\.py", tree):
            missing.append(str(f.relative_to(REPO)))
    assert missing == []


def test_the_readme_layout_names_what_exists():
    text = (REPO / "README.md").read_text()
    tree = text[text.index("## Layout"):]
    tree = tree[tree.index("```") + 3: tree.index("```", tree.index("```") + 3)]
    named = []
    for line in tree.splitlines():
        first = line.strip().split(" ")[0]
        if first.endswith("/") or first.endswith(".py"):
            named.append((line.index(first), first))
    parents: list[tuple[int, str]] = []
    missing = []
    for indent, name in named:
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = "/".join([p for _, p in parents] + [name]).replace("//", "/")
        if not (REPO / path).exists():
            missing.append(path)
        if name.endswith("/"):
            parents.append((indent, name.rstrip("/")))
    assert len(named) >= 15 and missing == []


def test_ci_runs_the_two_set_up_commands_and_every_tier_contributing_lists():
    """`make test` runs alone, then `make demo` and the other tiers in the lanes side by side; each tier
    CONTRIBUTING.md lists runs exactly once."""
    ci = (REPO / ".ci" / "run").read_text()
    steps = re.findall(r"^step make ([\w-]+)$", ci, re.M)
    lanes = [line.split() for line in re.findall(r"^lane \d+ ([\w -]+?) & ", ci, re.M)]
    text = (REPO / "CONTRIBUTING.md").read_text()
    table = text[text.index("| command | what it checks |"):]
    tiers = re.findall(r"^\| `make ([\w-]+)` \|", table, re.M)
    ran = steps + [t for lane in lanes for t in lane]
    assert steps == ["test"] and len(lanes) == 2 and "demo" in ran and len(tiers) >= 6
    assert sorted(t for t in ran if t != "demo") == sorted(tiers)
    assert ci.index("step make test") < min(ci.index(f"lane {i} ") for i in (1, 2))


def test_every_marker_is_a_tier_of_its_own_and_every_tier_names_its_slowest_tests():
    """Each pytest marker pyproject declares is left out of the fast tier and run by a make target
    (`pytest -m <marker>`; the SLURM tier through tests/slurm/run.sh); every run prints its 15 slowest."""
    import tomllib

    opts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    names = [m.split(":", 1)[0] for m in opts["markers"]]
    recipes = (REPO / "Makefile").read_text() + (REPO / "tests" / "slurm" / "run.sh").read_text()
    assert len(names) >= 10 and [n for n in names if not re.search(rf"\bnot {n}\b", opts["addopts"])] == []
    assert [n for n in names if not re.search(rf"pytest -q -m {n}\b", recipes)] == []
    assert "--durations=15" in opts["addopts"].split()
