"""Where ARK keeps its data: ``ARK_HOME``, the one root of every default data path.

Under it: STaRK's hub files (``stark/``), each graph's cache with its BM25 index and node embeddings
(``cache/<graph>/``; a tables or RDF graph's folder is named by the hash of its absolute path, so it is
found from any working directory), the local encoders (``cache/models/``) and the LLM reply caches
(``cache/llm/``). ``paths.data`` in conf/config.yaml (``${ark_home:}``), ``--root`` of every ``ark`` verb,
the graph sources and the scripts all default to it.

    from ark.home import ark_home, home_origin
    ark_home()      # $ARK_HOME; else <checkout>/data when ark is imported from a checkout;
                    # else $XDG_CACHE_HOME/ark (~/.cache/ark) for an installed package
    home_origin()   # which of the three it is, in words (``ark build`` prints it)

Move the caches by setting ``ARK_HOME`` (``export ARK_HOME=/big/disk/ark``), or pass ``--root`` /
``paths.data=...`` for one command.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "ARK_HOME"
_PACKAGE = Path(__file__).resolve().parent   # ark/


def checkout() -> Path | None:
    """The repository ark is imported from (``pip install -e .`` or ``PYTHONPATH``): the folder above
    ``ark/`` when it holds the project's pyproject.toml and conf/; None for an installed package."""
    repo = _PACKAGE.parent
    if (repo / "pyproject.toml").is_file() and (repo / "conf" / "config.yaml").is_file():
        return repo
    return None


def user_cache() -> Path:
    """The user cache directory's ``ark`` folder: ``$XDG_CACHE_HOME/ark``, else ``~/.cache/ark``."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "ark"


def ark_home() -> Path:
    """The data root (an absolute path): ``$ARK_HOME``, else the checkout's ``data/``, else `user_cache`."""
    env = os.environ.get(ENV) or ""
    if env:
        return Path(env).expanduser().absolute()
    repo = checkout()
    return repo / "data" if repo is not None else user_cache()


def home_origin() -> str:
    """Why `ark_home` is where it is, in a few words."""
    if os.environ.get(ENV):
        return f"{ENV} from the environment"
    if checkout() is not None:
        return f"the checkout's data/ ({ENV} unset)"
    return f"the user cache directory ({ENV} unset)"


def data_root(root: str | Path | None) -> Path:
    """``root`` as a path, or `ark_home` when it is None (the default of every data-root argument)."""
    return Path(root) if root is not None else ark_home()
