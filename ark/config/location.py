"""Where the Hydra configs are: the one place every entry point asks for ``conf/``.

    from ark.config.location import conf_dir, option_names
    conf_dir()                  # .../conf
    option_names("backbone")    # ['gpt-4.1', 'gpt-4.1-azure', 'gpt-4o', 'local', ...]

In a checkout (``pip install -e .``, or ``PYTHONPATH``) the configs are its ``conf/``, beside ``ark/``; a
built package (``pip install .``, a wheel) carries a copy at ``ark/conf/`` (setup.py copies it in), which
`conf_dir` looks for first, so an installed ``ark`` finds its configs from any directory.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]   # ark/


def conf_dir() -> Path:
    """The config folder: ``ark/conf/`` when the package carries one, else the checkout's ``conf/``."""
    packaged = _PACKAGE / "conf"
    if (packaged / "config.yaml").is_file():
        return packaged
    return _PACKAGE.parent / "conf"


def repo_root() -> Path:
    """The checkout's root (the folder holding ``ark/``, ``conf/`` and ``results/``)."""
    return _PACKAGE.parent


def option_names(group: str) -> list[str]:
    """The options of a config group (the ``.yaml`` files of ``conf/<group>/``), sorted."""
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))
