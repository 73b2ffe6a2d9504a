"""ark.logs: a run's output is the repo's own. Third-party log lines (bm25s' index build, httpx's request
lines, Hydra's timestamped job logging) stay out of a run's stdout and stderr by default and show with
verbose=true; the repo's own lines and third-party warnings always show.
"""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ark import logs
from tests.helpers.policies import search_select_finish
from tests.helpers.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"
BM25S = "Building index from IDs objects"    # bm25s, at DEBUG, on every index build
HTTPX = "HTTP Request: POST"                 # httpx, at INFO, on every request through the openai SDK
HYDRA_FORMAT = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\]\[", re.M)   # Hydra's job logging format


@pytest.fixture
def root_logger():
    """The root logger, restored afterwards (setup replaces its console handlers)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    filters = {h: list(h.filters) for h in handlers}
    yield root
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
        h.filters[:] = filters[h]
    root.setLevel(level)


def _records(root_logger, capsys, verbose: bool) -> str:
    console = logging.StreamHandler(sys.stdout)         # as Hydra's job logging leaves it
    root_logger.addHandler(console)
    logs.setup(verbose=verbose)
    logs.setup(verbose=verbose)                          # a sweep's second job: still one handler
    assert console not in root_logger.handlers
    capsys.readouterr()
    logging.getLogger("bm25s").debug(BM25S)              # bm25s sets its own logger to DEBUG
    logging.getLogger("httpx").info(HTTPX + " http://x")
    logging.getLogger("ark.data.sources").info("graph cache stale; rebuilding")
    logging.getLogger("__main__").info("a script's own line")
    logging.getLogger("urllib3").warning("a third-party warning")
    out, err = capsys.readouterr()
    assert out == ""
    return err


@pytest.fixture
def library_levels():
    """The loggers' own levels as the libraries leave them (bm25s sets DEBUG, the others inherit the
    root's), whatever earlier tests set; restored afterwards."""
    levels = {"bm25s": logging.DEBUG, "httpx": logging.NOTSET, "urllib3": logging.NOTSET, "ark": logging.NOTSET,
              "ark.data.sources": logging.NOTSET, "__main__": logging.NOTSET}
    before = {name: logging.getLogger(name).level for name in levels}
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


def test_third_party_records_pass_from_warning_unless_verbose(root_logger, library_levels, capsys):
    quiet = _records(root_logger, capsys, verbose=False)
    assert quiet.splitlines() == ["graph cache stale; rebuilding", "a script's own line",
                                  "urllib3: a third-party warning"]
    loud = _records(root_logger, capsys, verbose=True)
    assert loud.splitlines() == [f"bm25s: {BM25S}", f"httpx: {HTTPX} http://x", "graph cache stale; rebuilding",
                                 "a script's own line", "urllib3: a third-party warning"]


def test_the_handler_writes_to_the_stderr_of_the_moment(root_logger):
    logs.setup()
    for _ in range(2):   # a stderr replaced (a test's capture, then another) gets the next line
        sys.stderr, real = io.StringIO(), sys.stderr
        try:
            logging.getLogger("ark").warning("a line")
            assert sys.stderr.getvalue() == "a line\n"
        finally:
            sys.stderr = real


def test_file_handlers_stay_and_get_the_same_filter(root_logger, tmp_path):
    run_log = logging.FileHandler(tmp_path / "run.log")   # Hydra's run.log in the run directory
    root_logger.addHandler(run_log)
    logs.setup(verbose=False)
    assert run_log in root_logger.handlers
    logging.getLogger("httpx").info(HTTPX)
    logging.getLogger("ark.run.runner").warning("a query failed")
    run_log.flush()
    assert (tmp_path / "run.log").read_text() == "a query failed\n"
    root_logger.removeHandler(run_log)
    run_log.close()


def _run(tmp_path: Path, server: ScriptedServer, *extra: str) -> subprocess.CompletedProcess:
    """An ARK run through experiments/run.py on a fresh copy of the tables graph (so its BM25 index is
    built), calling the scripted server through the openai SDK (httpx)."""
    args = ["graph=tables", f"graph.path={KG}", "graph.name=tables_kg", "backbone=scripted",
            f"backbone.base_url={server.base_url}", "+backbone.http=openai", "budget=t5_n1",
            "budget.agent.n_agents=1", "limit=2", f"paths.data={tmp_path}/data", f"paths.runs={tmp_path}/runs",
            f"paths.llm_cache={tmp_path}/llm.sqlite", "progress=false", "n_boot=20", *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0", "OPENAI_API_KEY": "sk-test-logs"}
    tmp_path.mkdir()
    return subprocess.run([sys.executable, str(REPO / "experiments" / "run.py"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.commands
def test_a_runs_output_is_its_own_unless_verbose(tmp_path):
    with ScriptedServer(responder=search_select_finish) as server:
        quiet = _run(tmp_path / "quiet", server)
        loud = _run(tmp_path / "loud", server, "verbose=true")
    assert quiet.returncode == 0 and loud.returncode == 0, quiet.stderr + loud.stderr
    assert server.calls >= 4    # two queries answered through httpx in each run
    for text in (quiet.stdout, quiet.stderr):
        assert BM25S not in text and HTTPX not in text and not HYDRA_FORMAT.search(text), text
    assert quiet.stderr.strip() == "", quiet.stderr
    assert "2/2 ok" in quiet.stdout                        # the run's own summary
    assert f"bm25s: {BM25S}" in loud.stderr.splitlines()
    # prefixed with httpx's logger name (the openai SDK's httpx logs under "httpx" or "httpx2")
    assert re.search(rf"^httpx\w*: {HTTPX} {re.escape(server.base_url)}", loud.stderr, re.M), loud.stderr
    assert BM25S not in loud.stdout and not HYDRA_FORMAT.search(loud.stdout + loud.stderr)


@pytest.mark.parametrize("verbose", [False, True])
def test_ark_build_index_is_quiet_unless_verbose(root_logger, tmp_path, capsys, verbose):
    from ark.cli.main import main

    flags = ["-v"] if verbose else []
    assert main([*flags, "build", "--graph", str(KG), "--root", str(tmp_path), "--index", "--no-queries"]) == 0
    out, err = capsys.readouterr()
    assert '"bm25_index"' in out                                     # the command's own output
    assert (f"bm25s: {BM25S}" in err.splitlines()) is verbose, err
