"""Reading one RDF file: its format by suffix, its triples (N-Triples streamed line by line, the other
formats through rdflib) and their collection by subject, in one pass. A syntax error is one `RdfError`
naming the file and the line.

Hostile files are read in bounded time and never reach the network: a line (an N-Triples statement,
a long literal) is read in time linear in its length; RDF/XML text is gathered once per element, an
entity declared through another entity (the "billion laughs" bomb) or a parameter entity is refused,
and the XML parser's own amplification limit stands; a JSON-LD ``@context`` given by URL is refused
unless ``remote_contexts`` is set (the build then fetches it, the only time it touches the network).

    from ark.data.rdf.read import collect, rdf_format, read_triples
    triples, prefixes = read_triples(path, rdf_format(path))
"""

from __future__ import annotations

import contextvars
import gzip
import io
import re
import sys
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
            # rdflib's own readline rescans its whole buffer for each 2 KB read: quadratic on a long line
            line = self.file.readline()
            if not line:
                return None
            self.lineno += 1
            self.text = line = line.rstrip("\r\n")
            return line

        def parseline(self, bnode_context=None):
            try:
                super().parseline(bnode_context)
            except ParserError as e:
                shown = re.sub(r"\s+", " ", self.text.strip())[:120]
                raise RdfError(f"{path}: line {self.lineno}: bad N-Triples statement {shown!r} "
                               f"({str(e).split(' at ')[0]})") from None

    parser = Parser(Sink())
    with _open(path) as f:
        # newline="": a line ends at CRLF, CR or LF, as N-Triples says, and is handed over as written
        parser.file = io.TextIOWrapper(f, encoding="utf-8", newline="")
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


_NETWORK: contextvars.ContextVar[str | None] = contextvars.ContextVar("ark_rdf_network", default=None)
_HOOKED = False


def _refuse_network(event: str, args: tuple) -> None:
    """An audit hook: while a file is parsed without ``remote_contexts``, no URL is opened."""
    if event == "urllib.Request" and (path := _NETWORK.get()) is not None:
        raise RdfError(f"{path}: refers to {args[0]} (a remote JSON-LD @context); a build does not fetch "
                       f"it: inline the context, or set remote_contexts=true to fetch it")


def _no_network(path: Path):
    """Opening a URL (urllib) raises `RdfError` naming ``path`` until the returned token is reset."""
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_refuse_network)
        _HOOKED = True
    return _NETWORK.set(str(path))


def _parse_xml(path: Path, f, store) -> None:
    """RDF/XML through rdflib's handler, its text gathered once per element and entities bounded."""
    from xml.sax import handler
    from xml.sax.expatreader import ExpatParser
    from xml.sax.xmlreader import InputSource

    from rdflib.plugins.parsers.rdfxml import RDFXMLHandler

    class Handler(RDFXMLHandler):
        # rdflib adds each piece of text to the literal (str +=); expat hands text over line by line and
        # entity by entity, so a long literal cost time quadratic in its length. Here: joined once.
        def __init__(self, store):
            super().__init__(store)
            self.pending: list[str] = []

        def flush(self):
            if self.pending:
                text = "".join(self.pending)
                self.pending.clear()
                super().characters(text)

        def characters(self, content):
            self.pending.append(content)

        def startElementNS(self, name, qname, attrs):
            self.flush()
            super().startElementNS(name, qname, attrs)

        def endElementNS(self, name, qname):
            self.flush()
            super().endElementNS(name, qname)

    def entity(name, is_parameter, value, base, system_id, public_id, notation):
        if is_parameter:
            raise RdfError(f"{path}: the DTD declares parameter entity %{name}; (refused: entities are "
                           f"expanded only when declared with plain text)")
        if value is not None and re.search(r"&[A-Za-z_:]", value):
            raise RdfError(f"{path}: the DTD declares entity &{name}; through another entity (refused: nested "
                           f"entities expand without bound, the 'billion laughs' attack)")

    class Reader(ExpatParser):
        def reset(self):
            super().reset()
            self._parser.EntityDeclHandler = entity

    reader = Reader()
    reader.start_namespace_decl("xml", "http://www.w3.org/XML/1998/namespace")   # as rdflib's own parser
    reader.setFeature(handler.feature_namespaces, 1)
    content = Handler(store)
    source = InputSource(path.resolve().as_uri())
    source.setPublicId(path.resolve().as_uri())       # the base of relative IRIs, as rdflib's parse sets it
    source.setByteStream(f)
    reader.setContentHandler(content)
    reader.parse(source)


def read_triples(path: Path, fmt: str, remote_contexts: bool = False) -> tuple[Iterator[tuple], dict[str, str]]:
    """(the file's triples as rdflib terms, its namespace prefixes). Raises `RdfError` on bad syntax.

    ``remote_contexts``: a JSON-LD ``@context`` given by an http(s) URL is fetched; otherwise it is
    refused in one line naming it (no other format opens a URL)."""
    import rdflib

    if fmt == "nt":
        return _nt_triples(path), dict(PREFIXES)
    store = rdflib.Dataset() if fmt in DATASET_FORMATS else rdflib.Graph()
    token = None if remote_contexts else _no_network(path)
    try:
        with _open(path) as f:
            if fmt == "xml":
                _parse_xml(path, f, store)
            else:
                store.parse(f, format=fmt, publicID=path.resolve().as_uri())
    except RdfError:
        raise
    except Exception as e:  # each rdflib parser raises its own kind (BadSyntax, SAXParseException, ...)
        raise _syntax_error(path, e) from None
    finally:
        if token is not None:
            _NETWORK.reset(token)
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
