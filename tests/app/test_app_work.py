"""One description of a piece of work and when it starts (:class:`app.runtime.work.Work`): a page's slow call
starts by itself once ("auto"), only on a button ("button"), or each time the page asks ("each_time", a
timing whose result is handed out once). Each script below is one page run in AppTest; the work records
every call in a file, so the tests count how often it really ran."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from browser_helpers import ok

TIMEOUT = 60


def _page(log: str, start: str) -> None:
    """A page that shows one piece of work and what it returned."""
    import streamlit as st

    from app.runtime.work import Work

    def measure(tag: str, _progress=None) -> str:
        with open(log, "a", encoding="utf-8") as f:
            f.write(tag + "\n")
        return f"measured {tag}"

    result = Work("measure", "Measuring", measure, ("x",), start=start).show()
    st.markdown(result if result is not None else "nothing yet")


def _shared_button(log: str) -> None:
    """A page whose two pieces of work start on one shared button; each is shown only once started."""
    import streamlit as st

    from app.runtime.work import Work, start_button

    def measure(tag: str, _progress=None) -> str:
        with open(log, "a", encoding="utf-8") as f:
            f.write(tag + "\n")
        return f"measured {tag}"

    works = [Work(f"measure_{t}", f"Measuring {t}", measure, (t,), start="button") for t in ("a", "b")]
    start_button("Measure both", "both", works)
    shown = [w.show() for w in works if w.started()]
    st.markdown(", ".join(r for r in shown if r is not None) or "nothing yet")


def _run(script, *args) -> AppTest:
    at = AppTest.from_function(script, args=args, default_timeout=TIMEOUT)
    return ok(at.run())


def _calls(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def _texts(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown]


def test_auto_work_starts_when_the_page_asks_and_only_once(tmp_path):
    log = tmp_path / "calls.txt"
    at = _run(_page, str(log), "auto")
    assert _texts(at) == ["measured x"] and _calls(log) == ["x"]
    ok(at.run())                                                     # the next page run: the same job's result
    assert _texts(at) == ["measured x"] and _calls(log) == ["x"]


def test_button_work_draws_its_button_and_starts_nothing_until_pressed(tmp_path):
    log = tmp_path / "calls.txt"
    at = _run(_page, str(log), "button")
    run = at.button(key="hp_w_job_run_measure")                      # the key browser tests find it by
    assert run.label == "Run: Measuring" and _texts(at) == ["nothing yet"] and _calls(log) == []
    ok(at.run())
    assert _calls(log) == []                                         # a rerun does not start it either
    ok(run.click().run())
    assert _texts(at) == ["measured x"] and _calls(log) == ["x"]
    assert not [b for b in at.button if b.label.startswith("Run:")]  # gone once the result shows


def test_each_time_work_hands_its_result_out_once_and_measures_again_next_time(tmp_path):
    log = tmp_path / "calls.txt"
    at = _run(_page, str(log), "each_time")
    assert _texts(at) == ["measured x"] and _calls(log) == ["x"]
    ok(at.run())                                                     # same arguments, but a timing: again
    assert _texts(at) == ["measured x"] and _calls(log) == ["x", "x"]


def test_a_shared_start_button_starts_every_work_at_once_and_goes(tmp_path):
    log = tmp_path / "calls.txt"
    at = _run(_shared_button, str(log))
    assert [b.label for b in at.button] == ["Measure both"] and _calls(log) == []   # no "Run:" button of their own
    ok(at.button(key="hp_w_job_both").click().run())
    assert _texts(at) == ["measured a, measured b"] and sorted(_calls(log)) == ["a", "b"]
    assert not at.button
    ok(at.run())
    assert sorted(_calls(log)) == ["a", "b"]                         # "button" work, once started, is not redone


def test_an_unknown_start_says_which_there_are():
    from app.runtime.work import Work

    with pytest.raises(ValueError, match="auto, button, each_time.*'later'"):
        Work("measure", "Measuring", print, start="later")
