"""Chaos tier: the fuzz of the RDF and tables readers (tests/test_reader_fuzz.py) on 3,000 cases with
other seeds: every mutated graph is read, or refused in the reader's own one line, within its guard.

    PYTHONPATH=$PWD .venv/bin/python -m pytest -q -m chaos tests/chaos/test_reader_fuzz_chaos.py
"""

from __future__ import annotations

import pytest

from tests.test_reader_fuzz import fuzz

pytestmark = pytest.mark.chaos


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_thousands_of_mutated_graphs_are_read_or_refused_in_one_line(tmp_path, seed):
    ends = fuzz(tmp_path, 1000, seed=seed)
    assert sum(ends.values()) == 1000 and ends["error"] > 0 and ends["graph"] > 0
