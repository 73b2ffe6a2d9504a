"""Where log records go: the repo's own lines on stderr, third-party libraries' only when asked for.

Libraries this repo uses log on their own: bm25s logs "Building index from IDs objects" at DEBUG on
every index build (its logger is set to DEBUG), httpx one "HTTP Request: ..." line per LLM call, and
Hydra's job logging prints every record reaching the root logger to stdout with a timestamp.
`setup` keeps a run's output the repo's own: one stderr handler in place of any console handler
already on the root logger (Hydra's), the repo's records (``ark``, ``experiments``, a script's
``__main__``) from INFO, and third-party records only from WARNING unless ``verbose``. File handlers
(Hydra's ``run.log`` in the run directory) stay and get the same filter.

    from ark import logs
    logs.setup(verbose=False)           # experiments/run.py (verbose=true) and `ark -v` call this

W&B's own terminal messages are the W&B logger's (`ark.run.logger.WandbLogger`, its ``verbose``).
"""

from __future__ import annotations

import logging
import sys

OWN = ("ark", "experiments", "scripts", "__main__")


def is_own(name: str) -> bool:
    """Whether a logger name is the repo's own (``ark.data.sources``, ``__main__``...)."""
    return name.split(".", 1)[0] in OWN


class ThirdPartyFilter(logging.Filter):
    """Pass the repo's records; other libraries' only from WARNING, or all when ``verbose``."""

    def __init__(self, verbose: bool = False):
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        return self.verbose or record.levelno >= logging.WARNING or is_own(record.name)


class _Stderr(logging.StreamHandler):
    """A stream handler on whatever ``sys.stderr`` is when a record comes (a test's capture, a closed
    one replaced), not the stream it was made with."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


class _Format(logging.Formatter):
    """The repo's lines as they are; another library's prefixed with its logger name."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text if is_own(record.name) else f"{record.name}: {text}"


def setup(verbose: bool = False) -> None:
    """Send log records to one stderr handler: the repo's own from INFO, third-party libraries' from
    WARNING (all of them, from INFO or the level a library sets itself, when ``verbose``). Replaces
    the console handlers on the root logger (plain stream handlers on stdout or stderr: Hydra's job
    logging, an earlier call's); keeps the others (Hydra's ``run.log``), filtered the same way, so
    calling it again (each job of a sweep) leaves one handler and one filter each."""
    root = logging.getLogger()
    consoles = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
    for h in list(root.handlers):
        if isinstance(h, _Stderr) or (type(h) is logging.StreamHandler and h.stream in consoles):
            root.removeHandler(h)
    handler = _Stderr()
    handler.setFormatter(_Format("%(message)s"))
    root.addHandler(handler)
    for h in root.handlers:
        for f in [f for f in h.filters if isinstance(f, ThirdPartyFilter)]:
            h.removeFilter(f)
        h.addFilter(ThirdPartyFilter(verbose))
    root.setLevel(logging.INFO)
