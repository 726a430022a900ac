"""Any file uploaded on the Dynamics, SMP compare or Curves (kinds) page, however broken, is read or refused with
a :class:`HeadpruneError` that names the file and says what to do, and what the page then draws from a file it
read never raises: the reader checks what the figures need."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given

from app.curves import dynamics
from bad_inputs import FUZZ, assert_clear, documents
from pruning_core.analysis.dynamics import summary_rows as dynamics_rows
from pruning_core.core.io.codec import read_document
from pruning_core.evaluation.kinds import KindSensitivity, borrow
from pruning_core.scoring.smp.compare import CompareResult, summary_rows as compare_rows

FORMATS = Path(__file__).parents[1] / "fixtures" / "formats"
NAME = "File 'upload.json'"


def _fixture(name: str) -> dict:
    return json.loads((FORMATS / name).read_text())


def _dynamics_page(raw: bytes) -> None:
    result = dynamics.read_dynamics(raw, NAME)
    if result.checkpoints:
        dynamics.curves_by_step_figure(result)
        dynamics.rank_correlation_figure(result)
        dynamics.drop_heatmap_figure(result)
        dynamics_rows(result)
        json.dumps(result.to_json(), allow_nan=True)


def _compare_page(raw: bytes) -> None:
    result = read_document(raw, CompareResult.from_json, NAME)
    rows = compare_rows(result)
    assert rows and "metric_name" in rows[0], "the page reads the first row's metric_name"
    result.rows()
    json.dumps(result.to_json(), allow_nan=True)


def _kinds_borrow(raw: bytes) -> None:
    other = read_document(raw, KindSensitivity.from_json, NAME)
    own = KindSensitivity.from_json(_fixture("kinds-1.json"))
    borrow(own, [other])


def test_the_fixtures_read_and_draw():
    _dynamics_page(json.dumps(_fixture("dynamics-1.json")).encode())
    _compare_page(json.dumps(_fixture("smp_compare-1.json")).encode())
    _kinds_borrow(json.dumps(_fixture("kinds-1.json")).encode())


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@FUZZ
@given(documents(_fixture("dynamics-1.json")))
def test_any_dynamics_upload_is_drawn_or_refused_clearly(text):
    assert_clear(lambda: _dynamics_page(_bytes(text)), NAME)


@FUZZ
@given(documents(_fixture("smp_compare-1.json")))
def test_any_smp_compare_upload_is_drawn_or_refused_clearly(text):
    assert_clear(lambda: _compare_page(_bytes(text)), NAME)


@FUZZ
@given(documents(_fixture("kinds-1.json")))
def test_any_kinds_upload_is_borrowed_from_or_refused_clearly(text):
    assert_clear(lambda: _kinds_borrow(_bytes(text)), NAME)
