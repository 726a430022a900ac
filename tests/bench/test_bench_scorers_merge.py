"""``benchmarks/scorers.py --merge``: a run cut short is completed only with the sizes it was measured at."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import scorers  # noqa: E402

SETUP = scorers.SETUPS["smollm2"]


def _file(tmp_path: Path, **changes) -> Path:
    settings = {"score_limit": SETUP.score_limit, "verify_limit": SETUP.verify_limit, "k": SETUP.k,
                "test_limit": SETUP.test_limit, "max_length": SETUP.max_length, "fractions": list(SETUP.fractions),
                "batch_size": 32, "eval_batch": 64} | changes
    path = tmp_path / "scorers-smollm2.json"
    path.write_text(json.dumps({"model": "smollm2", "task": "movie-text", "note": "first run",
                                "rows": [{"label": "flap"}], "provenance": {"settings": settings}}))
    return path


def test_the_rows_and_note_of_a_run_at_the_same_sizes_are_kept(tmp_path):
    rows, note = scorers.previous_rows(_file(tmp_path), SETUP, eval_batch=64, batch_size=32)
    assert rows == [{"label": "flap"}] and note == "first run"


def test_a_run_at_other_sizes_is_refused_with_what_differs(tmp_path):
    with pytest.raises(SystemExit, match=r"test_limit.*\(128, 64\)"):
        scorers.previous_rows(_file(tmp_path, test_limit=128), SETUP, eval_batch=64, batch_size=32)


def test_no_file_is_nothing_to_keep(tmp_path):
    assert scorers.previous_rows(tmp_path / "none.json", SETUP, eval_batch=64, batch_size=32) == ([], "")


def test_merge_measures_only_what_only_names_and_keeps_the_rest():
    skips = {label: "left out by --only" for label, *_ in scorers.RUNS if label not in ("confidence", "entropy")}
    todo, earlier = scorers.plan("confidence,entropy", skips, [{"label": "gradient"}, {"label": "entropy"}])
    assert [t[0] for t in todo] == ["confidence", "entropy"]        # --only's order
    assert earlier == [{"label": "gradient"}]                      # kept; entropy is measured again
