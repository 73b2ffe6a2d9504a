"""Where the Hydra configs are: the one place every entry point asks for ``conf/``.

    from ark.config.location import conf_dir, option_names
    conf_dir()                  # .../conf
    option_names("backbone")    # ['gpt-4.1', 'gpt-4.1-azure', 'gpt-4o', 'local', ...]

Today the configs live in the checkout's ``conf/``, beside ``ark/``. A build that ships them inside the
installed package puts them at ``ark/conf/``; `conf_dir` looks there first, so nothing else changes
when that happens.
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


def option_names(group: str) -> list[str]:
    """The options of a config group (the ``.yaml`` files of ``conf/<group>/``), sorted."""
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))
