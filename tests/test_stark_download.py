"""`ark download` for real: huggingface_hub talking HTTP to a local stand-in for the hub.

The stand-in (tests/helpers/hub_server.py) serves a small dataset repo in STaRK's hub layout
(tests/data/stark_fixtures.build_hub_repo: zipped processed files, QA csv, split files); the command
runs in a subprocess with ``HF_ENDPOINT`` pointing at it, exactly as a user with a hub mirror would
run it. Without a reachable hub the command must end in one line, not a traceback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ark.data import stark
from tests.helpers import stark_fixtures as fx
from tests.helpers.hub_server import HubServer

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return fx.build(tmp_path_factory.mktemp("fixtures"))


@pytest.fixture(scope="module")
def hub(tmp_path_factory, source):
    repo = fx.build_hub_repo(tmp_path_factory.mktemp("hub-repo"), processed=source)
    with HubServer(repo) as server:
        yield server


def _cli(args: list[str], tmp_path: Path, endpoint: str, offline: str = "0") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_OFFLINE=offline, HF_HOME=str(tmp_path / "hf-home"),
               HF_HUB_DISABLE_TELEMETRY="1", PYTHONPATH=str(REPO), NO_PROXY="127.0.0.1,localhost")
    return subprocess.run([sys.executable, "-m", "ark", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def _same_graph(a, b) -> None:
    assert a.num_nodes == b.num_nodes and a.num_edges == b.num_edges
    assert a.relation_names == b.relation_names and a.node_type_names == b.node_type_names
    assert a.candidate_ids.tolist() == b.candidate_ids.tolist()
    assert [a.node_text(i) for i in range(a.num_nodes)] == [b.node_text(i) for i in range(b.num_nodes)]
    for v in range(a.num_nodes):
        ea, eb = a.neighbors(v), b.neighbors(v)
        assert np.array_equal(ea.nodes, eb.nodes) and np.array_equal(ea.relations, eb.relations)
        assert np.array_equal(ea.outgoing, eb.outgoing)


@pytest.mark.commands   # huggingface_hub downloading each graph's files from a local hub (about 3 s each)
@pytest.mark.parametrize("name", stark.STARK_GRAPHS)
def test_download_through_huggingface_hub_from_a_local_hub(hub, source, tmp_path, name):
    hub.requests.clear()
    root = tmp_path / "data" / "stark"      # --root is the data root; STaRK's files go under <root>/stark
    r = _cli(["download", name, "--root", str(root.parent), "--no-progress"], tmp_path, hub.url)
    assert r.returncode == 0, r.stderr
    assert f"{name}: all files present under {root}" in r.stdout
    # what was fetched: processed.zip and exactly the files under the folders stark-qa fetches
    wanted = [f for f in hub.files() if f in stark.hub_files(name)
              or any(h.endswith("/") and f.startswith(h) for h in stark.hub_files(name))]
    assert sorted(hub.downloaded()) == sorted(wanted)
    assert not any("raw" in f for f in hub.downloaded())
    assert not (root / "skb" / name / "processed.zip").exists()        # unzipped, then removed
    _same_graph(stark.read_graph(name, root), stark.read_graph(name, source))
    ours, theirs = stark.read_queries(name, root), stark.read_queries(name, source)
    assert [(q.id, q.text, q.answer_ids) for q in ours] == [(q.id, q.text, q.answer_ids) for q in theirs]
    assert {s: ours.positions(s).tolist() for s in stark.SPLITS} == {s: theirs.positions(s).tolist() for s in stark.SPLITS}

    # everything on disk: a second run sends no request at all
    hub.requests.clear()
    again = _cli(["download", name, "--root", str(root.parent), "--no-progress"], tmp_path, hub.url)
    assert again.returncode == 0 and hub.requests == []
    # one split file lost: only the QA folder is asked for again, and only that file is sent
    (root / "qa" / name / "split" / "val.index").unlink()
    assert stark.missing_files(name, root) == [f"qa/{name}/"]
    check = _cli(["download", name, "--root", str(root.parent), "--check"], tmp_path, hub.url, offline="1")
    assert check.returncode == 1 and json.loads(check.stdout) == {"graph": name, "root": str(root),
                                                                  "missing": [f"qa/{name}/"]}
    assert _cli(["download", name, "--root", str(root.parent), "--no-progress"], tmp_path, hub.url).returncode == 0
    assert hub.downloaded() == [f"qa/{name}/split/val.index"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("offline", ["0", "1"])
@pytest.mark.commands
def test_unreachable_hub_ends_in_one_line_with_the_missing_files_and_the_ways_out(tmp_path, offline):
    root = tmp_path / "data" / "stark"
    r = _cli(["download", "prime", "--root", str(root.parent), "--no-progress"], tmp_path,
             f"http://127.0.0.1:{_closed_port()}", offline=offline)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    reason = "the hub client is offline (HF_HUB_OFFLINE=1)" if offline == "1" else "could not reach the hub at http://127.0.0.1:"
    assert line.startswith("ark download: error: cannot download STaRK prime: " + reason)
    for path in ("skb/prime/processed/node_info.pkl", "qa/prime/stark_qa/stark_qa.csv", "qa/prime/split/test.index"):
        assert path in line
    assert "HF_ENDPOINT" in line and f"ark download prime --root {root.parent} --check" in line
    assert "unzip skb/prime/processed.zip into skb/prime/" in line


@pytest.mark.commands
def test_hub_answering_an_error_is_one_line_too(tmp_path):
    empty = tmp_path / "empty-repo"
    empty.mkdir()
    with HubServer(empty) as server:
        r = _cli(["download", "mag", "--root", str(tmp_path), "--no-progress"], tmp_path, server.url)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "the hub at " + server.url + " answered HTTP 404" in r.stderr


def test_an_unknown_graph_is_one_line_with_the_choices(tmp_path, capsys):
    from ark.cli.main import main

    assert main(["download", "wikidata", "--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("ark download: error: unknown STaRK graph 'wikidata'; "
                                       f"valid: {', '.join(stark.STARK_GRAPHS)}, all\n")
    assert list(tmp_path.iterdir()) == []
