"""Fixtures every tier shares. The helpers behind them live in `tests/helpers/`: the toy graph, the
scripted OpenAI-compatible server and its agent policies, the local Hugging Face hub stand-in,
synthetic STaRK files, run-directory fixtures, the tiny retriever and the golden runs. The environment
guard (`tests.helpers.env_guard`) is registered here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.paths import DEMO_ROOT

# every tier, the comparison tier's own environment included: a run that changes .venv, the checkout or
# the data root fails (tests/helpers/env_guard.py)
pytest_plugins = ["tests.helpers.env_guard"]


@pytest.fixture(scope="session")
def demo_root() -> Path:
    """The data root of the demo graph (`ark.data.sources.DemoSource` builds it there on first use)."""
    return DEMO_ROOT


@pytest.fixture
def scripted():
    """The scripted server answering as an agent that searches the question, selects what it saw and
    finishes (`tests.helpers.policies.search_select_finish`)."""
    from tests.helpers.policies import search_select_finish
    from tests.helpers.scripted_server import ScriptedServer

    with ScriptedServer(responder=search_select_finish) as server:
        yield server


@pytest.fixture
def kg(tmp_path) -> Path:
    """A copy of the hand-made tables graph (`tests/data/tables_kg`) in the test's own folder, to edit."""
    import shutil

    from tests.helpers.paths import REPO

    folder = tmp_path / "kg"
    shutil.copytree(REPO / "tests" / "data" / "tables_kg", folder)
    return folder
