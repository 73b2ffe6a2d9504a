"""Paths the tests share: the checkout and the data root where the demo graph is built (``ARK_TEST_DATA``
overrides it, e.g. to share one build between checkouts)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO_ROOT = Path(os.environ.get("ARK_TEST_DATA", REPO / "data"))
