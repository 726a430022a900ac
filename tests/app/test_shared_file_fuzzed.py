"""Any file uploaded on the Share page (an analysis bundle, the HTML report, a bare mask), however broken, is
read or refused with a :class:`HeadpruneError` that names the file and says what to do."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from app.share.analysis import BUNDLE_SCRIPT_ID, read_shared_file
from bad_inputs import FUZZ, assert_clear, documents

BUNDLE = json.loads((Path(__file__).parents[1] / "fixtures" / "formats" / "analysis-1.json").read_text())
NAME = "upload.json"


def _report(text: str) -> str:
    return f'<html><body><script type="application/json" id="{BUNDLE_SCRIPT_ID}">{text}</script></body></html>'


@st.composite
def shared_files(draw) -> bytes:
    """A broken bundle, a broken bare mask, or either inside an HTML report; bytes as uploaded."""
    text = draw(documents(BUNDLE) | documents(BUNDLE["mask"]))
    if draw(st.integers(0, 4)) == 0:
        text = _report(text)
    return text.encode("utf-8", "surrogatepass")


def test_the_bundle_fixture_reads():
    assert read_shared_file(json.dumps(BUNDLE).encode(), NAME).to_json()["mask"] == BUNDLE["mask"]


@FUZZ
@given(shared_files())
def test_any_shared_file_is_read_or_refused_clearly(raw):
    assert_clear(lambda: read_shared_file(raw, NAME), NAME)
