"""The trajectory viewer's page in headless Chromium (`make test-browser`, which installs Debian's
`chromium` as root, or says in one line how to): it renders, runs no script error, makes no network
request, and shows the gold ids highlighted. Debian's browser, driven by the `playwright` Python package
(never its own download); without the browser this tier fails, so a viewer nobody could open never
looks green."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark.report import viewer as V
from tests.test_viewer import EVIL, run  # noqa: F401  (the fixture: a small run directory)

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"


def test_viewer_in_headless_chromium(run, tmp_path):
    from playwright import sync_api  # requirements.txt; the browser itself is Debian's, never downloaded

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: make test-browser installs it (as root: apt-get install -y chromium)"
    page_file = V.write_viewer(run, tmp_path / "viewer.html")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: errors.append(f"network: {r.url}")
                    if not r.url.startswith(("file:", "data:", "about:")) else None)
            page.goto(page_file.as_uri())
            assert page.locator("tr.q").count() == 3
            assert page.locator("tr.q.failed").count() == 1
            page.click('tr.q[data-qid="11"]')
            assert page.locator(".agent").count() == 2
            assert page.locator("tr.step").count() == 5 + 3                 # agent 0: 5 calls, agent 1: 3
            assert page.locator(".agent[data-agent='0'] .tool").all_inner_texts()[:3] == \
                ["search_graph", "search_graph", "explore_neighbors"]
            gold = page.locator("#ranking .node.gold").all_inner_texts()
            assert sorted(gold) == ["7", "8"]                               # both gold ids in the fusion
            # where each gold was found or lost, and the gold ids marked inside the observations' text
            rows = page.locator("#attribution tr.gold-row")
            assert [rows.nth(i).get_attribute("data-cls") for i in range(rows.count())] == \
                ["retrieved", "retrieved", "surfaced_not_selected"]
            assert "step 0 · agent 0 · search_graph · rank 2" in rows.nth(0).inner_text()
            marks = page.locator(".agent pre mark.gold")
            assert sorted(marks.all_text_contents()) == ["[44]", "[7]"]
            assert marks.first.is_visible()                                  # its observation is open
            assert "surfaced, not selected" in page.inner_text('tr.q[data-qid="11"]')
            assert "Which papers by X cite Y?" in page.inner_text("#detail")
            shot = tmp_path / "viewer.png"
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000
            # hostile query text shows as text, not markup
            page.click('tr.q[data-qid="12"]')
            assert EVIL in page.inner_text("#detail")
            assert page.locator("#detail img").count() == 0
            # the filter box narrows the list
            page.fill("#filter", "papers by X")
            assert page.locator("tr.q").count() == 1
        finally:
            browser.close()
    assert errors == []
