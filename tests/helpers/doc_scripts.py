"""Parse the docs' calls of scripts under scripts/ with each script's own argparse parser, without running them.

    python -m tests.helpers.doc_scripts '[["scripts/bench_tables.py", "--reuse"], ...]'

Prints one JSON line per call: {"argv": [...], "problem": null | "..."}. Each script runs as
``__main__`` with ``ArgumentParser.parse_args`` wrapped: the real parse
happens (a bad option is argparse's own error, exit 2), then the script is stopped before it does
anything else. Only scripts whose source calls ``parse_args`` are run this way; a call of a script
that stops without parsing is a problem. One process parses them all (`tests/test_docs.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import runpy
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class Parsed(Exception):
    """The script's arguments parsed: stop it here."""


def _wrap(original):
    def parse(self, args=None, namespace=None):
        original(self, args, namespace)   # argparse's own errors exit 2 here
        raise Parsed()
    return parse


def parse_one(argv: list[str]) -> str | None:
    script = REPO / argv[0]
    if not script.is_file():
        return f"no file {argv[0]}"
    if "parse_args(" not in script.read_text(encoding="utf-8"):
        return None   # a script without an argparse parser: its existence is what can be checked
    sys.argv = [str(script), *argv[1:]]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(script), run_name="__main__")
    except Parsed:
        return None
    except SystemExit as e:
        if e.code in (0, None):
            return None
        return f"{' '.join(argv)}: " + (err.getvalue().strip().splitlines() or [f"exit {e.code}"])[-1]
    except Exception as e:   # the script failed before it parsed its arguments
        return f"{' '.join(argv)}: {type(e).__name__}: {e}"
    return f"{' '.join(argv)}: the script ended without parsing its arguments"


def main() -> None:
    sys.path.insert(0, str(REPO))
    argparse.ArgumentParser.parse_args = _wrap(argparse.ArgumentParser.parse_args)
    calls = json.loads(sys.argv[1])
    saved = list(sys.argv)
    for argv in calls:
        problem = parse_one(argv)
        sys.argv = saved
        print(json.dumps({"argv": argv, "problem": problem}), flush=True)


if __name__ == "__main__":
    main()
