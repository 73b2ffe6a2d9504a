"""Hostile RDF files (ark.data.rdf.read): a "billion laughs" RDF/XML bomb, entities repeated in a long
literal, a literal of tens of megabytes, a JSON-LD file whose @context is a URL. Each is built by the
real ``ark build`` in a process of its own under a wall-time guard (a hang fails the test, it is never
a timed assertion): it ends in a graph or in one line naming the file, and never touches the network.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ark.data.rdf.source import RdfSource
from ark.data.rdf.vocabulary import RdfError

REPO = Path(__file__).resolve().parents[1]
HOSTILE = REPO / "tests" / "data" / "hostile"
GUARD_S = 120      # far beyond what these builds take; the old code ran past 240 s on each


def ark_build(path: Path, root: Path, *settings: str, verb: str = "build") -> subprocess.CompletedProcess:
    """``ark <verb> --graph rdf`` on ``path`` (build, or mcp with stdin closed); a process still running
    after GUARD_S fails the test."""
    cmd = [sys.executable, "-m", "ark", verb, "--graph", "rdf", "--set", f"path={path}", "--set", "name=h",
           "--root", str(root), *[x for s in settings for x in ("--set", s)]]
    try:
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=GUARD_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ark {verb} on {path.name} still running after {GUARD_S} s (hung)")


def one_line_error(done: subprocess.CompletedProcess, path: Path) -> str:
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], done.stderr
    return lines[0]


@pytest.mark.parametrize("verb", ["build", "mcp"])
def test_billion_laughs_is_refused_in_one_line(tmp_path, verb):
    bomb = HOSTILE / "laughs.rdf"
    line = one_line_error(ark_build(bomb, tmp_path / "data", verb=verb), bomb)
    assert "entity &lol1; through another entity" in line and "billion laughs" in line
    assert not (tmp_path / "data" / "cache").exists() or not any((tmp_path / "data" / "cache").iterdir())


def test_plain_entities_still_expand_and_a_repeated_one_is_read_in_linear_time(tmp_path):
    """Entities declared with plain text (as ontology editors write namespaces) are kept; one entity
    used 200,000 times in a literal (2 MB of text, 200,000 pieces) builds at once."""
    path = tmp_path / "flat.rdf"
    path.write_text('<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [ <!ENTITY ex "http://example.org/">'
                    ' <!ENTITY a "0123456789"> ]>\n'
                    '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
                    'xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#">\n'
                    '<rdf:Description rdf:about="&ex;a"><rdf:type rdf:resource="&ex;Thing"/>'
                    '<rdfs:label>Flat</rdfs:label><rdfs:comment>' + "&a;\n" * 200_000 +
                    '</rdfs:comment></rdf:Description>\n</rdf:RDF>\n')
    done = ark_build(path, tmp_path / "data")
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert (stats["nodes"], stats["nodes_per_type"]) == (1, {"Thing": 1})
    g = RdfSource(path, root=tmp_path / "data").graph()
    assert g.node_text(0).count("0123456789") == 200_000


def test_a_literal_of_thirty_megabytes_is_read(tmp_path):
    path = tmp_path / "big.nt"
    words = "light " * 5_000_000                                     # 30 MB on one line
    path.write_text(f'<http://example.org/a> <http://www.w3.org/2000/01/rdf-schema#comment> "{words}" .\n'
                    '<http://example.org/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> '
                    '<http://example.org/Doc> .\n')
    done = ark_build(path, tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["nodes_per_type"] == {"Doc": 1}


def test_line_numbers_still_count_every_line_ending(tmp_path):
    """N-Triples lines end at LF, CRLF or a lone CR; a bad statement is named by its line."""
    path = tmp_path / "kg.nt"
    ok = '<http://e.org/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://e.org/T> .'
    path.write_bytes((ok + "\r\n" + ok + "\r" + ok + "\n" + "<http://e.org/b> oops .\n").encode())
    with pytest.raises(RdfError, match=r"kg\.nt: line 4: bad N-Triples statement '<http://e.org/b> oops \.'"):
        RdfSource(path, root=tmp_path / "data").graph()


class _Contexts(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):
        type(self).hits.append(self.path)
        body = json.dumps({"@context": {"name": "http://www.w3.org/2000/01/rdf-schema#label"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/ld+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def context_server():
    _Contexts.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Contexts)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/ctx.jsonld"
    server.shutdown()


@pytest.mark.parametrize("where", ["top", "nested", "import"])
def test_a_remote_json_ld_context_is_refused_unless_asked_for(tmp_path, context_server, where):
    doc = {"@id": "http://example.org/a", "@type": "http://example.org/T", "name": "Alpha"}
    if where == "top":
        doc["@context"] = context_server
    elif where == "nested":
        doc = {"@graph": [doc], "@context": [{"ex": "http://example.org/"}, context_server]}
    else:
        doc["@context"] = {"@version": 1.1, "@import": context_server}
    path = tmp_path / "kg.jsonld"
    path.write_text(json.dumps(doc))
    with pytest.raises(RdfError) as e:
        RdfSource(path, root=tmp_path / "data").graph()
    assert str(e.value) == (f"{path}: refers to {context_server} (a remote JSON-LD @context); a build does not "
                            f"fetch it: inline the context, or set remote_contexts=true to fetch it")
    assert _Contexts.hits == []                                         # not even one request
    g = RdfSource(path, root=tmp_path / "data", remote_contexts=True).graph()
    assert _Contexts.hits == ["/ctx.jsonld"] and g.node_name(0) == "Alpha"


def test_a_context_reached_through_a_local_file_is_refused_as_well(tmp_path, context_server):
    """A local context file is read; a URL it names is refused by the guard on every URL opened."""
    (tmp_path / "local.jsonld").write_text(json.dumps({"@context": {"@version": 1.1, "@import": context_server}}))
    path = tmp_path / "kg.jsonld"
    path.write_text(json.dumps({"@context": "local.jsonld", "@id": "http://example.org/a",
                                "@type": "http://example.org/T", "name": "Alpha"}))
    with pytest.raises(RdfError, match=f"refers to {context_server} "):
        RdfSource(path, root=tmp_path / "data").graph()
    assert _Contexts.hits == []


def test_ark_build_names_the_remote_context_in_one_line(tmp_path):
    ctx = HOSTILE / "context.jsonld"
    line = one_line_error(ark_build(ctx, tmp_path / "data"), ctx)
    assert "http://127.0.0.1:9/context.jsonld" in line and "remote_contexts=true" in line


def test_a_parameter_entity_is_refused(tmp_path):
    path = tmp_path / "kg.rdf"
    path.write_text('<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [ <!ENTITY % p "<!ENTITY a \'x\'>"> %p; ]>\n'
                    '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>\n')
    with pytest.raises(RdfError) as e:
        RdfSource(path, root=tmp_path / "data").graph()
    assert str(e.value).startswith(f"{path}: the DTD declares parameter entity %p;")
    assert not (tmp_path / "data").exists()
