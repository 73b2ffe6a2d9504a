"""Fuzz of the RDF and tables readers: the test graphs (tests/data/rdf_kg, tests/data/tables_kg) cut short
at random bytes and with random bytes flipped, each read by the real source in this process. Every case
ends in a graph (and its queries) or in the reader's own one-line error; any other exception (a traceback
at the command line) or a case past its wall-time guard fails. A few hundred cases here; the chaos tier
(tests/chaos/test_reader_fuzz_chaos.py) runs thousands.
"""

from __future__ import annotations

import random
import signal
import shutil
from pathlib import Path

import pytest

from ark.data.rdf.source import RdfSource
from ark.data.rdf.vocabulary import RdfError
from ark.data.tables.format import TablesError
from ark.data.tables.source import TablesSource

REPO = Path(__file__).resolve().parents[1]
RDF = REPO / "tests" / "data" / "rdf_kg"
TABLES = REPO / "tests" / "data" / "tables_kg"
GUARD_S = 30        # one case past this is a hang
FAST_CASES = 300


def rdf_inputs(folder: Path) -> list[Path]:
    """The art graph as Turtle, N-Triples and (serialised here by rdflib) RDF/XML and JSON-LD."""
    import rdflib

    out = [shutil.copy(RDF / "art.ttl", folder / "art.ttl"), shutil.copy(RDF / "art.nt", folder / "art.nt")]
    g = rdflib.Graph().parse(RDF / "art.ttl")
    for fmt, name in (("xml", "art.rdf"), ("json-ld", "art.jsonld")):
        (folder / name).write_text(g.serialize(format=fmt))
        out.append(folder / name)
    return [Path(p) for p in out]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """Cut short, some bytes flipped, or both."""
    kind = rng.choice(("cut", "flip", "both"))
    if kind in ("cut", "both"):
        data = data[:rng.randrange(len(data) + 1)]
    if kind in ("flip", "both") and data:
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] ^= rng.randrange(1, 256)
        data = bytes(b)
    return data


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def read_case(kind: str, path: Path, root: Path) -> str:
    """Read one mutated input with the real source: "graph", or "error: <line>"; anything else raises."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(GUARD_S)
    try:
        if kind == "rdf":
            g = RdfSource(path, root=root).build()
        elif kind == "tables":
            g = TablesSource(path, root=root).build()
        else:                                              # the queries are read against the cached graph
            source = TablesSource(path, root=root)
            g = source.graph()
            source.queries()
        assert g.num_nodes > 0
        return "graph"
    except (RdfError, TablesError) as e:
        line = str(e)
        assert line and "\n" not in line, f"{path}: a message of several lines: {line!r}"
        return "error: " + line
    except Hang:
        pytest.fail(f"{path}: still reading after {GUARD_S} s (a hang)")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def fuzz(tmp: Path, cases: int, seed: int) -> dict[str, int]:
    """``cases`` mutated inputs, each read once; returns how many ended in a graph and in an error."""
    rng = random.Random(seed)
    originals = tmp / "originals"
    originals.mkdir()
    rdf = rdf_inputs(originals)
    table_files = sorted(p.name for p in TABLES.iterdir())
    ends = {"graph": 0, "error": 0}
    for i in range(cases):
        case = tmp / f"case{i}"
        case.mkdir()
        if rng.random() < 0.5:
            src = rng.choice(rdf)
            path = case / src.name
            path.write_bytes(mutate(src.read_bytes(), rng))
            end = read_case("rdf", path, tmp / "data")
        else:
            path = case / "kg"
            shutil.copytree(TABLES, path)
            victim = path / rng.choice(table_files)
            victim.write_bytes(mutate(victim.read_bytes(), rng))
            end = read_case("queries" if victim.name.startswith("queries") else "tables", path, case / "data")
        ends[end.split(":")[0]] += 1
        shutil.rmtree(case)
    return ends


def test_every_mutated_graph_is_read_or_refused_in_one_line(tmp_path):
    ends = fuzz(tmp_path, FAST_CASES, seed=37)
    assert sum(ends.values()) == FAST_CASES and ends["error"] > 0 and ends["graph"] > 0
