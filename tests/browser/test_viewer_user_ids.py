"""The trajectory viewer's page in headless Chromium for a run on a graph with ids of its own: its
observations show the id column's ids ([P1]), and the page marks the gold ones in that form (the
internal ids would mark nothing, or other nodes). Debian's browser, driven by the `playwright` package."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark.report import viewer as V
from tests.test_viewer import tables_run

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"


def test_gold_ids_are_marked_in_the_graphs_own_ids(tmp_path):
    from playwright import sync_api  # the browser itself is Debian's, never downloaded

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing (as root: apt-get install -y chromium)"
    run_dir = tables_run(tmp_path)
    (q,) = V.build_view(run_dir)["queries"]
    page_file = V.write_viewer(run_dir, tmp_path / "viewer.html")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.goto(page_file.as_uri())
            page.click(f'tr.q[data-qid="{q["query_id"]}"]')
            marks = page.locator(".agent pre mark.gold").all_text_contents()
        finally:
            browser.close()
    assert marks and set(marks) == {"[P1]"}                                  # q1's gold, as shown
