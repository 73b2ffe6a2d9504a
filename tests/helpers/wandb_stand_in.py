"""A stand-in for W&B's servers at its Python API boundary: ``wandb.init`` returns a run that writes what
it was asked for (mode, project, group, name, tags, summary, artifacts) to a JSON-lines file instead of
syncing anywhere, and ``finish`` records that the run ended.

Only the run's init/finish is stood in for: everything before it is W&B's own (``wandb.setup``, the
settings it reads, ``wandb.login``'s look-up of a key), so the mode the repo picks is the one it would
pick online. A test installs it in the processes it starts (``make`` -> ``experiments.table1`` ->
``experiments/run.py``) with `site_dir`: a ``sitecustomize`` on ``PYTHONPATH`` that installs it where
``ARK_WANDB_STAND_IN`` names the record file.

    env["PYTHONPATH"] = f"{site_dir(tmp)}:{REPO}"; env["ARK_WANDB_STAND_IN"] = str(tmp / "wandb.jsonl")
    ... run the command ...; records(tmp / "wandb.jsonl")
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

ENV = "ARK_WANDB_STAND_IN"
URL = "https://wandb.stand-in"
_ids = itertools.count()


class StandInRun:
    """What ``wandb.init`` returns here: the attributes and methods ark.run.logger uses."""

    def __init__(self, record: Path, **init: Any):
        self.record = record
        self.id = f"{os.getpid()}-{next(_ids)}"
        self.name = init.get("name") or self.id
        self.init = {k: init.get(k) for k in ("mode", "project", "entity", "group", "name", "tags", "job_type")}
        self.url = f"{URL}/{init.get('entity') or 'me'}/{init.get('project')}/runs/{self.id}"
        run_dir = Path(init.get("dir") or record.parent) / "wandb" / f"stand-in-run-{self.id}"
        (run_dir / "files").mkdir(parents=True, exist_ok=True)
        self.dir = str(run_dir / "files")
        self.summary: dict[str, Any] = {}
        self.history_keys: set[str] = set()
        self.artifacts: list[tuple[str, str]] = []
        self._write({"event": "init", **self.init, "url": self.url})

    def log(self, data: dict, step: int | None = None) -> None:
        self.history_keys.update(data)

    def log_artifact(self, artifact) -> None:
        self.artifacts.append((artifact.name, artifact.type))

    def finish(self) -> None:
        self._write({"event": "finish", "name": self.name, "summary": self.summary,
                     "history_keys": sorted(self.history_keys), "artifacts": self.artifacts})

    def _write(self, rec: dict) -> None:
        with open(self.record, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, default=str) + "\n")


def install(record: Path | str) -> None:
    """Replace ``wandb.init`` in this process by one returning a `StandInRun` recording to ``record``."""
    import wandb

    wandb.init = lambda **init: StandInRun(Path(record), **init)


def site_dir(tmp: Path) -> Path:
    """A folder holding a ``sitecustomize`` that installs the stand-in in every Python process started with
    it on ``PYTHONPATH`` (and the repository after it) and ``ARK_WANDB_STAND_IN`` set."""
    site = Path(tmp) / "wandb-stand-in-site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import os\n"
        f"if os.environ.get({ENV!r}):\n"
        "    from tests.helpers.wandb_stand_in import install\n"
        f"    install(os.environ[{ENV!r}])\n")
    return site


def records(path: Path | str) -> list[dict]:
    """The init and finish records written to ``path``, in order."""
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
