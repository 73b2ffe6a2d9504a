"""Fixtures of the SLURM tier: the cluster and the scripted server its jobs talk to.

The cluster is the one `tests/slurm/run.sh` started (``ARK_SLURM_TEST_CONF`` names its slurm.conf),
or else one started here for the session and stopped at its end (`tests.slurm.cluster`). Either way
the tests' client commands and jobs reach it through ``SLURM_CONF``, never a cluster configured on
the machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.slurm.cluster import Cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    conf = os.environ.get("ARK_SLURM_TEST_CONF")
    if conf:
        c = Cluster(Path(conf).parent)
        assert c.node_state() in ("idle", "mix", "alloc"), f"the cluster of {conf} does not answer (sinfo)"
        owned = False
    else:
        c = Cluster(tmp_path_factory.mktemp("slurm")).start()
        owned = True
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(c.conf)
    try:
        yield c
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        if owned:
            c.stop()
