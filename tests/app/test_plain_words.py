"""What a student reads carries no internal names (issue 40, item 12): kinds by their labels, large counts with
separators, one rounding per metric in a table, model titles without quantisation jargon."""
from __future__ import annotations

import pytest

from app.curves import tables
from app.share import report
from pruning_core.modeling.sources import catalog
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadLayout
from pruning_core.core.io.share_link import decode_mask
from pruning_core.evaluation.kinds import KindPoint, KindSensitivity


def test_a_report_writes_large_counts_with_separators():
    assert report._cell(22713986) == "22,713,986" and report._cell(42) == 42 and report._cell(True) is True
    html = report._table(["variant", "parameters"], [["pruned", 22713986]], numeric={1})
    assert "22,713,986" in html and "22713986" not in html


def test_a_metric_column_has_one_rounding():
    points = tuple(KindPoint("cross", 0.5, 8, "importance", None, v, 1.0) for v in (29.6154, 24.78))
    run = KindSensitivity("bleu", 31.6, None, None, 128, {"cross": 16}, (), points)
    assert list(tables.kinds_frame(run)["BLEU"]) == [29.62, 24.78]


def test_a_link_for_another_model_names_the_kind_in_words():
    with pytest.raises(FormatError) as err:
        decode_mask("e:f.f.f", HeadLayout({"encoder_self": (4,) * 6}))
    assert "encoder self-attention layers" in str(err.value) and "encoder_self" not in str(err.value)


@pytest.mark.parametrize("name", catalog.names())
def test_the_model_picker_speaks_plainly(name):
    title = catalog.get(name).title
    assert not any(word in title for word in ("dequantized", "GGUF", "int8", "AWQ", "Q4_K_M", "KV ")), title


def test_a_borrowed_run_counts_its_own_unit():
    """The Whisper panel borrowed into the kinds figure counts utterances, as the rest of the dashboard does."""
    from app.curves import kinds

    whisper = next(r for r in kinds.bundled_runs() if r.provenance.get("model") == "whisper-base")
    assert kinds.run_unit(whisper) == "utterance"
    from pruning_core.evaluation.kinds import source_label
    assert source_label(whisper, "utterance").endswith(f"WER, {whisper.n_examples} utterances")
    assert "examples" not in source_label(whisper, "utterance")
