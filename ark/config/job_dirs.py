"""Which directories Hydra made for a single run's job: noted before Hydra starts, read when the job stops.

Hydra makes its run directory (``hydra.run.dir``, the run's ``out_dir``) before the job starts. The
command line (`ark.config.app.command_line`) notes which directories on the way to ``out_dir`` do not
exist yet (`note_before_job`); a job that stops before its run began removes exactly those
(`made_by_hydra`, `ark.config.evaluation.job`), wherever ``out_dir=`` points, and never a folder that was there.

    note_before_job(Path(cfg.out_dir))          # before Hydra's job starts
    seen, made = made_by_hydra(job_dir)         # in the job: (noted?, the highest directory Hydra made)
"""

from __future__ import annotations

from pathlib import Path

# a single run's out_dir (resolved) -> the highest of its directories that did not exist before Hydra's job
# made it (None: out_dir existed)
_BEFORE_JOB: dict[str, Path | None] = {}


def _highest_missing(path: Path) -> Path | None:
    """The highest directory on the way to ``path`` (``path`` included) that does not exist, or None."""
    top = None
    for p in [path, *path.parents]:
        if p.exists():
            break
        top = p
    return top


def note_before_job(out_dir: Path | str) -> None:
    """Note which directories of ``out_dir`` do not exist yet (call before Hydra's job starts)."""
    out = Path(out_dir).resolve()
    _BEFORE_JOB[str(out)] = _highest_missing(out)


def made_by_hydra(job_dir: Path | str) -> tuple[bool, Path | None]:
    """(whether ``job_dir`` was noted before Hydra's job started, the highest of its directories that did
    not exist then: what Hydra made for the job; None when ``job_dir`` existed already)."""
    k = str(Path(job_dir).resolve())
    return k in _BEFORE_JOB, _BEFORE_JOB.get(k)
