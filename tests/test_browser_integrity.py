"""The trust badge (issue 19) in a real browser: every view's shared header shows the
integrity route's total for the selected trace, a click opens the report with the rules and
findings the route lists, and the Overview's step time carries its caveat marker.

The run is tests/data/integrity/ours.json.gz (tests/integrity_fixtures.py), which breaks
each of the report's own rules once or twice: 10 findings.
"""
from __future__ import annotations

import shutil

import pytest
from browser_support import API, get_json, hash_state, serving, settle
from datafiles import DATA

RUN = "trust"


@pytest.fixture(scope="module")
def trust_url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("integrity_browser")
    (tmp / "logdir" / RUN).mkdir(parents=True)
    shutil.copy(DATA / "integrity" / "ours.json.gz", tmp / "logdir" / RUN / "worker0.1.pt.trace.json.gz")
    with serving(tmp / "logdir", tmp / "cache") as base:
        yield base


def test_badge_counts_as_the_route_and_opens_the_report(trust_url, watch):
    _, doc = get_json(f"{trust_url}/{API}/integrity?run={RUN}")
    assert doc["total"] == 10
    watch.open(f"{trust_url}/{hash_state(view='Overview', run=RUN)}")
    page = watch.page
    badge = page.locator("button.trust-badge")
    badge.wait_for(timeout=60_000)
    assert badge.get_attribute("data-total") == str(doc["total"])
    assert f"{doc['total']} findings" in badge.inner_text()
    settle(page)
    assert page.locator('.caveat[data-figure="step_time"]').count() >= 1  # steps left out, unlaunched work
    assert page.locator('.caveat[data-figure="idle"]').count() == 1      # stream overlap
    badge.click()
    report = page.get_by_role("dialog", name="Trust report")
    text = report.inner_text()
    for rule, n in doc["rules"].items():
        assert report.locator(f'tr[data-rule="{rule}"] td.num').first.inner_text() == str(n)
    for f in doc["findings"]:
        assert f["detail"][:40] in text
    watch.shot("trust-report")
    page.get_by_role("tab", name="Operator").click()  # another view: the same badge in the shared header
    page.locator("button.trust-badge").wait_for(timeout=60_000)
    assert page.locator("button.trust-badge").get_attribute("data-total") == str(doc["total"])
    page.get_by_role("tab", name="Diff").click()  # the Diff view: each side's own badge, beside its pickers
    side = page.locator(".side-picker").first.locator("button.trust-badge")
    side.wait_for(timeout=60_000)
    assert side.get_attribute("data-total") == str(doc["total"])
    assert watch.errors == [], watch.errors
