"""Reading one RDF file: its format by suffix, its triples (N-Triples streamed line by line, the other
formats through rdflib) and their collection by subject, in one pass. A syntax error is one `RdfError`
naming the file and the line.

    from ark.data.rdf.read import collect, rdf_format, read_triples
    triples, prefixes = read_triples(path, rdf_format(path))
"""

from __future__ import annotations

import gzip
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

from ark.data.rdf.vocabulary import DATASET_FORMATS, FORMATS, PREFIXES, TYPE, RdfError


def rdf_format(path: Path, fmt: str | None = None) -> str:
    """The rdflib format of ``path``: ``fmt`` if given, else by suffix (a trailing ``.gz`` skipped)."""
    valid = sorted(set(FORMATS.values()))
    if fmt is not None:
        if fmt not in valid:
            raise RdfError(f"unknown RDF format {fmt!r}; valid formats: {', '.join(valid)}")
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    if not suffixes or suffixes[-1] not in FORMATS:
        raise RdfError(f"{path}: unknown RDF file suffix {''.join(path.suffixes)!r}; valid suffixes: "
                       f"{', '.join(FORMATS)} (optionally + .gz), or set format ({', '.join(valid)})")
    return FORMATS[suffixes[-1]]


def is_rdf_path(path: Path | str) -> bool:
    """Whether ``path``'s suffix names an RDF format (`FORMATS`, optionally + ``.gz``)."""
    try:
        rdf_format(Path(path))
        return True
    except RdfError:
        return False


def rdf_stem(path: Path) -> str:
    """The file's name without its RDF suffix (and ``.gz``): ``my.kg.ttl.gz`` -> ``my.kg``."""
    name = path.name[:-3] if path.name.lower().endswith(".gz") else path.name
    suffix = Path(name).suffix
    return (name[:-len(suffix)] if suffix.lower() in FORMATS else name) or name


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix.lower() == ".gz" else open(path, "rb")


def _syntax_error(path: Path, e: Exception) -> RdfError:
    """rdflib's parse error as one line: file, line (where the parser says), what was wrong."""
    text = str(e).strip()
    line = getattr(e, "lineno", None) or (e.getLineNumber() if hasattr(e, "getLineNumber") else None)
    m = re.search(r"at line (\d+)", text)
    if m:
        line = int(m.group(1))
    bad = re.search(r"Bad syntax \((.*?)\) at \^", text, re.S)
    what = bad.group(1) if bad else (getattr(e, "msg", None) or text.splitlines()[-1] if text else type(e).__name__)
    what = re.sub(r"^.*?:\d+:\d+: ", "", re.sub(r"\s+", " ", str(what)).strip())[:200]   # SAX: "<file>:3:0: ..."
    return RdfError(f"{path}: line {line}: bad RDF syntax ({what})" if line else f"{path}: bad RDF syntax ({what})")


def _nt_triples(path: Path) -> Iterator[tuple]:
    """N-Triples streamed line by line (no rdflib graph in memory); a bad line names its number."""
    from rdflib.exceptions import ParserError
    from rdflib.plugins.parsers.ntriples import W3CNTriplesParser

    out: list[tuple] = []

    class Sink:
        def triple(self, s, p, o):
            out.append((s, p, o))

    class Parser(W3CNTriplesParser):
        lineno, text = 0, ""

        def readline(self):
            line = super().readline()
            if line is not None:
                self.lineno += 1
                self.text = line
            return line

        def parseline(self, bnode_context=None):
            try:
                super().parseline(bnode_context)
            except ParserError as e:
                shown = re.sub(r"\s+", " ", self.text.strip())[:120]
                raise RdfError(f"{path}: line {self.lineno}: bad N-Triples statement {shown!r} "
                               f"({str(e).split(' at ')[0]})") from None

    import codecs

    parser = Parser(Sink())
    with _open(path) as f:
        reader = codecs.getreader("utf-8")(f)
        parser.file = reader
        parser.buffer = ""
        try:
            while True:
                parser.line = parser.readline()
                if parser.line is None:
                    break
                parser.parseline()
                if len(out) >= 65536:
                    yield from out
                    out.clear()
        except UnicodeDecodeError as e:
            raise RdfError(f"{path}: line {parser.lineno + 1}: not UTF-8 ({e.reason})") from None
    yield from out


def read_triples(path: Path, fmt: str) -> tuple[Iterator[tuple], dict[str, str]]:
    """(the file's triples as rdflib terms, its namespace prefixes). Raises `RdfError` on bad syntax."""
    import rdflib

    if fmt == "nt":
        return _nt_triples(path), dict(PREFIXES)
    store = rdflib.Dataset() if fmt in DATASET_FORMATS else rdflib.Graph()
    try:
        with _open(path) as f:
            store.parse(f, format=fmt, publicID=path.resolve().as_uri())
    except RdfError:
        raise
    except Exception as e:  # each rdflib parser raises its own kind (BadSyntax, SAXParseException, ...)
        raise _syntax_error(path, e) from None
    prefixes = dict(PREFIXES)
    prefixes.update({p: str(ns) for p, ns in store.namespaces() if p})
    triples = ((s, p, o) for s, p, o, *_ in (store.quads((None, None, None, None)) if fmt in DATASET_FORMATS
                                              else store.triples((None, None, None))))
    return triples, prefixes


class Collected:
    """Every triple of the file, grouped by subject (one pass)."""

    def __init__(self):
        self.types: dict = defaultdict(list)      # IRI -> type IRIs
        self.literals: dict = defaultdict(list)   # subject -> (predicate, Literal)
        self.links: dict = defaultdict(list)      # subject -> (predicate, IRI or BNode)
        self.predicates: set[str] = set()
        self.triples = self.ignored = 0


def collect(triples, ignore: Sequence[str]) -> Collected:
    from rdflib import BNode, Literal

    c = Collected()
    ignore = tuple(ignore)
    for s, p, o in triples:
        c.triples += 1
        p = str(p)
        if ignore and (p.startswith(ignore) or (not isinstance(o, (Literal, BNode)) and str(o).startswith(ignore)
                                                and p != TYPE)):
            c.ignored += 1
            continue
        c.predicates.add(p)
        key = s if isinstance(s, BNode) else str(s)
        if isinstance(o, Literal):
            c.literals[key].append((p, o))
        elif p == TYPE and not isinstance(o, BNode):
            c.types[key].append(str(o))
        else:
            c.links[key].append((p, o if isinstance(o, BNode) else str(o)))
    return c
