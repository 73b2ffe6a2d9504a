"""The golden runs (`tests/helpers/golden_runs.py`) made now equal the stored ones file for file, byte for byte
once measured times, temporary paths and class import paths are taken out: a refactoring that changes
a prediction, a metric, a trajectory or a recorded setting fails here."""

from __future__ import annotations

import difflib

from tests.helpers import golden_runs


def test_golden_runs_are_unchanged(tmp_path):
    want = golden_runs.read()
    got = golden_runs.make(tmp_path)
    assert sorted(got) == sorted(want)
    for name in want:
        assert sorted(got[name]) == sorted(want[name]), name
        for rel, text in want[name].items():
            if got[name][rel] != text:
                diff = "".join(difflib.unified_diff(text.splitlines(True), got[name][rel].splitlines(True),
                                                    f"golden/{name}/{rel}", f"now/{name}/{rel}", n=1))
                raise AssertionError(f"{name}/{rel} changed (python -m tests.helpers.golden_runs --update rewrites "
                                     f"the golden files, only for an intended change):\n{diff[:4000]}")
