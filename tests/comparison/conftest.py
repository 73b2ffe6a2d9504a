"""Comparison tier set-up: stark-qa's own classes, run offline, next to ours.

These tests run in ``.venv-compare`` (stark-qa 1.1.0 + its importable minimum; see make_env.sh):

    bash tests/comparison/make_env.sh && .venv-compare/bin/pytest -m comparison tests/comparison

* No network: every socket connect outside loopback raises, and the hub client is told to stay offline.
* PyTDC: stark-qa's PrimeSKB imports ``tdc.resource.PrimeKG`` at module level but uses it only to build
  PRIME from raw files, never on the processed path we compare. PyTDC cannot be imported with
  numpy 2 / pandas 3 without a long chain of pinned packages (cellxgene-census, tiledbsoma, gget,
  mysql, rdkit), so when it is missing a stand-in module whose ``PrimeKG`` raises is installed.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import types
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The tier runs only where stark-qa is installed (.venv-compare); elsewhere (the main .venv, plain
# `pytest`) its modules are not even collected, so a module-level import of stark_qa cannot break them.
# A run that asks for the tier (`-m comparison`) without stark-qa fails at start instead of passing empty.
if importlib.util.find_spec("stark_qa") is None:
    collect_ignore_glob = ["test_*.py"]


def pytest_configure(config: pytest.Config) -> None:
    expr = config.getoption("markexpr") or ""
    if "comparison" in expr and "not comparison" not in expr and importlib.util.find_spec("stark_qa") is None:
        raise pytest.UsageError("the comparison tier needs stark-qa, which lives in .venv-compare: "
                                "bash tests/comparison/make_env.sh && .venv-compare/bin/pytest -m comparison tests/comparison")


def _install_tdc_stand_in() -> None:
    try:
        import tdc.resource  # noqa: F401
        return
    except Exception:
        pass

    class PrimeKG:  # only PrimeSKB._process_raw (raw PRIME files) would call it
        def __init__(self, *args, **kwargs):
            raise RuntimeError("PyTDC is not installed in this environment (comparison tier stand-in)")

    tdc = types.ModuleType("tdc")
    resource = types.ModuleType("tdc.resource")
    resource.PrimeKG = PrimeKG
    tdc.resource = resource
    sys.modules["tdc"] = tdc
    sys.modules["tdc.resource"] = resource


_install_tdc_stand_in()

_real_connect = socket.socket.connect


def _loopback_only(self, address, *args, **kwargs):
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and (host.startswith("127.") or host in ("localhost", "::1")) or self.family == socket.AF_UNIX:
        return _real_connect(self, address, *args, **kwargs)
    raise RuntimeError(f"comparison tier is offline: blocked a connection to {address!r}")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory) -> Path:
    """The three STaRK-layout fixture graphs of tests/data, written once per session."""
    from tests.helpers.stark_fixtures import build

    return build(tmp_path_factory.mktemp("stark-fixtures"))


@pytest.fixture(scope="session")
def stark_skb():
    """``stark_skb(name, root)``: stark-qa's SKB for a processed graph on disk, built without any download."""
    import pickle

    from stark_qa.skb import AmazonSKB, MagSKB, PrimeSKB

    def make(name: str, root: Path):
        skb_root = str(Path(root) / "skb" / name)
        if name == "mag":
            return MagSKB(root=skb_root, download_processed=False)
        if name == "amazon":
            return AmazonSKB(root=skb_root, download_processed=False)
        cls = PrimeSKB
        with open(Path(skb_root) / "processed" / "node_type_dict.pkl", "rb") as f:
            present = set(pickle.load(f).values())
        if not set(PrimeSKB.NODE_TYPES) <= present:
            # PrimeSKB takes candidates from all ten PRIME node types and raises when one is absent from
            # node_type_dict (a graph written with a subset of PRIME's types, e.g. the demo). Candidates
            # are then every node of the types present, which is what PRIME's "all nodes" means.
            cls = type("PrimeSubsetSKB", (PrimeSKB,),
                       {"candidate_types": [t for t in PrimeSKB.NODE_TYPES if t in present]})
        return cls(root=skb_root, download_processed=False)

    return make
