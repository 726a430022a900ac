"""End-to-end (Chromium + Playwright): a class walks the Tour on a tiny model. Opens step 1 by its
link, follows every step's Next button, and checks that each step shows its title, its one thing to
click, its link (the address bar's, with its step) and no exception or error (a step that needs a language model
says so instead of its thing to click); on the last step it
presses the one thing to click (time dense vs pruned) and follows the page link. Skipped when
Chromium is not installed (``make browser``).
"""
from __future__ import annotations

import time

import pytest

from app.tour import steps as tour
from browser_helpers import ARTIFACTS, new_page, wait_idle, wait_metric

pytestmark = pytest.mark.browser
playwright = pytest.importorskip("playwright.sync_api")


def no_failure(page, where: str) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, f"{where}: a traceback is shown"
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, f"{where}: {errors.first.inner_text()}"


def test_walk_the_tour(server, browser):
    started = time.perf_counter()
    page = new_page(browser, height=1400)
    page.goto(f"{server.url}/tour?step={tour.STEPS[0].name}")
    for n, step in enumerate(tour.STEPS):
        page.get_by_role("heading", name=f"Step {n + 1} of {len(tour.STEPS)}").wait_for()
        # the step's link is drawn last: once it names this step, the step's content is drawn
        link = page.locator('[data-testid="stCode"]').filter(has_text=f"step={step.name}")
        link.wait_for()
        wait_idle(page)
        heading = page.locator("h3").first.inner_text()
        assert step.title in heading, heading
        if "default" not in step.models:                 # the translation step: the default has one kind only
            page.get_by_text("This step runs on").first.wait_for()
        elif step.task_types and "classification" not in step.task_types:     # the induction step: an LM only
            page.get_by_text("This step needs a language model").first.wait_for()
        else:
            page.get_by_text("Now click").first.wait_for()
        assert "mask=" in link.inner_text() and "/tour?" in link.inner_text(), link.inner_text()
        assert f"step={step.name}" in page.evaluate("location.href")        # the address bar carries the step
        no_failure(page, step.name)
        page.screenshot(path=str(ARTIFACTS / f"tour-{n + 1}-{step.name}.png"), full_page=True)
        if n + 1 < len(tour.STEPS):
            page.get_by_role("button", name="Next:").click()
    # the last step's one thing to click, then its page link
    page.get_by_role("button", name="Time dense vs pruned").click()
    assert wait_metric(page, "latency (pruned)", lambda v: v.endswith("ms"))
    no_failure(page, "timing")
    page.get_by_role("link", name="Open Speed").click()
    page.get_by_role("heading", name="Speed").first.wait_for()
    wait_idle(page)
    no_failure(page, "speed page")
    assert "step=" not in page.evaluate("location.href")
    seconds = time.perf_counter() - started
    print(f"tour walked in {seconds:.1f} s")
    page.context.close()
