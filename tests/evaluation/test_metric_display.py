"""Every display reads the metric registry: labels, formats, chart scales, ablation order."""
from __future__ import annotations

from app.curves import figures as charts
from app.share import report
from app.core import ui
from pruning_core.cli import common as cli_common
from pruning_core.evaluation.experiments import AblationRow


def test_labels_formats_and_scales():
    assert ui.metric_label("bleu") == "BLEU" and ui.metric_label("accuracy") == "accuracy"
    assert ui.metric_text("accuracy", 0.853) == "85.3 %" and ui.metric_text("bleu", 27.314) == "27.31 BLEU"
    assert report._metric("bleu", 27.314) == "27.31 BLEU" and report._metric("accuracy", None) == "n/a"
    assert ui.metric_text("perplexity", 3.2) == report._metric("perplexity", 3.2) == "3.20"
    assert charts._scale("bleu") == (1.0, "BLEU") and charts._scale("accuracy") == (100.0, "accuracy (%)")
    assert charts._scale("perplexity") == (1.0, "perplexity")
    assert cli_common.fmt("bleu", 27.314) == "27.31" and cli_common.fmt("accuracy", 0.85) == "0.8500"


def _ablation_section(metric_name: str) -> str:
    from app.share.analysis import Analysis
    from pruning_core.evaluation.experiments import AblationResult
    from pruning_core.core.heads import HeadLayout, HeadMask

    layout = HeadLayout({"encoder_self": (3,)})
    rows = tuple(AblationRow("encoder_self", 0, h, 0.0, d, 0.0, 0.0) for h, d in enumerate([0.5, -0.5, 0.1]))
    table = AblationResult(metric_name, 1.0, 1.0, 4, rows)
    document = report.build_report(Analysis(model_id="m", layout=layout, mask=HeadMask.full(layout),
                                                  ablation=table))
    return document[document.index("Single-head ablation"):]


def test_ablation_report_lists_the_most_important_heads_first_either_way():
    higher = _ablation_section("accuracy")
    assert higher.index("-0.5000") < higher.index("+0.1000") < higher.index("+0.5000")    # largest drop first
    assert "Δ &lt; 0 means the head helps" in higher
    lower = _ablation_section("perplexity")
    assert lower.index("+0.5000") < lower.index("+0.1000") < lower.index("-0.5000")      # largest rise first
    assert "Δ &gt; 0 means the head helps" in lower
