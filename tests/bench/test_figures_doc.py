"""docs/FIGURES.md is what ``benchmarks/figures.py`` makes of ``benchmarks/results/*.json``: a figure edited by hand,
or a result added or changed without regenerating the page, fails here."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import figures  # noqa: E402


def test_the_committed_figures_page_is_the_scripts_output():
    diff = figures.difference(figures.DOC.read_text(encoding="utf-8"), figures.render())
    assert not diff, "docs/FIGURES.md differs from its results: run python benchmarks/figures.py\n" + diff[:4000]


def test_the_check_fails_on_a_figure_edited_by_hand(tmp_path, monkeypatch, capsys):
    page = figures.render()
    edited = tmp_path / "FIGURES.md"
    edited.write_text(page.replace("**45.33x**", "**40.00x**"), encoding="utf-8")
    monkeypatch.setattr(figures, "DOC", edited)
    assert figures.main(["--check"]) == 1
    assert "-| dashboard, a class of 30" in capsys.readouterr().out
    edited.write_text(page, encoding="utf-8")
    assert figures.main(["--check"]) == 0


def test_a_stale_result_goes_to_the_archive_and_an_unknown_kind_is_listed():
    row = {"what": "W", "figure": "F 1.5 s", "machine": "2 cores", "load": "load 1.0", "command": "c",
           "date": "2026-01-01"}
    docs = {"hand_kept.json": {"format": "headprune.hand_kept_figures/1",
                               "rows": [row, {**row, "what": "OLD", "stale": "superseded"}]},
            "new_bench.json": {"format": "headprune.new_bench/1", "created": "2026-01-02T03:04:05+0000"}}
    page = figures.render(docs)
    current, archive = page.split("## Archive")
    assert "| W | F 1.5 s |" in current and "OLD" not in current
    assert "| OLD |" in archive and archive.split("## Results")[0].rstrip().endswith("| superseded |")
    assert "| `new_bench.json` | new_bench | 2026-01-02 03:04 |" in page


def test_a_result_its_summariser_cannot_read_is_named():
    docs = {"dashboard_timings-new.json": {"format": "headprune.bench/1", "kind": "dashboard_timings", "runs": [{}]}}
    with pytest.raises(RuntimeError, match="'dashboard_timings' summariser cannot read dashboard_timings-new.json"):
        figures.render(docs)


def test_the_committed_curves_figure_is_the_scripts_output():
    import json

    import curves_figure

    doc = json.loads(curves_figure.SOURCE.read_text(encoding="utf-8"))
    assert curves_figure.OUT.read_text(encoding="utf-8") == curves_figure.svg(doc), \
        "docs/images/long_context_curves.svg differs from its results: run python benchmarks/curves_figure.py"


def test_the_curves_figure_draws_every_row_of_a_share():
    import curves_figure

    row = {"accuracy": 0.9, "wilson_95": [0.8, 0.95], "correct": 90, "examples": 100}
    doc = {"rows": {"m|t|2048|full|0|": row, "m|t|2048|retrieval|0.5|": row, "m|t|2048|random|0.5|0": row,
                    "m|t|2048|random|0.5|1": row, "m|t|2048|streaming|1|": row, "m|u|2048|full|0|": row}}
    panel = curves_figure.panels(doc)[("m", 2048, "0.5")]
    assert sorted(p for p, _ in panel["t"]) == ["full", "random", "random", "retrieval", "streaming"]
    assert curves_figure.svg(doc).count("<circle") == 6 + len(curves_figure.POLICIES)     # 6 rows, the legend


def test_a_curves_row_says_the_machine_and_time_its_own_rows_record():
    """Rows of one curves file can come from several machines: a FIGURES row names the CPU and time its rows record,
    and the file's own only where a row records none."""
    from figure_rows import long_context

    xeon = {"cpu": "Intel Xeon", "cores": 2, "amx_bf16": True}
    amd = {"cpu": "AMD EPYC", "cores": 2, "avx512_bf16": True}
    row = {"accuracy": 1.0, "wilson_95": [0.96, 1.0], "correct": 100, "examples": 100, "sink": 128, "window": 256,
           "kv_mib": 1.0, "full_kv_mib": 2.0, "compression_ratio": 0.4, "footprint_ratio": 0.6, "torch_threads": 2}
    models = {"m": {"provenance": {"created": "2026-12-06T21:54:03+00:00", "settings": {"limit": 100}}}}
    doc = {"machine": xeon, "models": models,
           "rows": {"m|t|4096|full|0|": {**row, "machine": amd, "created": "2026-12-07T04:08:05+00:00"},
                    "m|t|4096|retrieval|0.5|": {**row, "machine": amd, "created": "2026-12-07T04:30:59+00:00"},
                    "m|t|2048|full|0|": row, "m|t|2048|retrieval|0.5|": row}}
    rows = {r.what.split(":")[0]: r.machine for r in long_context.long_context_curves({"x.json": doc})}
    assert rows["t at 4,096 tokens, m"].startswith("2026-12-07 04:30, 2-core AMD EPYC (AVX-512 bf16)")
    assert rows["t at 2,048 tokens, m"].startswith("2026-12-06 21:54, 2-core Xeon (AMX)")


def test_a_curves_row_gives_rulers_score_where_it_differs_from_the_accuracy():
    """A task of several answers (common words: 10) gets partial credit in RULER's score; its row shows both, and a
    task of one answer, whose score is its accuracy, only the accuracy."""
    from figure_rows import long_context

    row = {"accuracy": 0.0, "wilson_95": [0.0, 0.04], "correct": 0, "examples": 100, "sink": 128, "window": 256,
           "kv_mib": 1.0, "full_kv_mib": 2.0, "compression_ratio": 0.4, "footprint_ratio": 0.6, "ruler_score": 0.452}
    models = {"m": {"provenance": {"created": "2026-12-06T21:54:03+00:00", "settings": {"limit": 100}}}}
    doc = {"machine": {"cpu": "AMD EPYC", "cores": 2}, "models": models,
           "rows": {"m|cw|2048|full|0|": row, "m|cw|2048|retrieval|0.5|": {**row, "ruler_score": 0.3},
                    "m|ns|2048|full|0|": {**row, "ruler_score": 0.0}, "m|ns|2048|retrieval|0.5|": row | {
                        "ruler_score": 0.0}}}
    rows = {r.what.split(":")[0]: r for r in long_context.long_context_curves({"x.json": doc})}
    several, one = rows["cw at 2,048 tokens, m"], rows["ns at 2,048 tokens, m"]
    assert "full 0/100 (0.00-0.04, RULER score 45.2 %)" in several.figure
    assert "retrieval 0/100 (0.00-0.04, RULER score 30.0 %)" in several.figure
    assert "RULER's score" in several.what and "RULER" not in one.figure + one.what
