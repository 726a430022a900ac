"""Head conventions, JSON formats and presets: shapes, round trips, clear errors."""
import json
from pathlib import Path

import pytest

from pruning_core.core.errors import FormatError, HeadpruneError
from pruning_core.core.heads import HeadLayout, HeadMask, HeadScores
from pruning_core.modeling.presets import (
    keep_top_fraction_per_layer,
    keep_top_per_layer,
    random_per_layer,
    remove_least_important,
    removed_per_layer,
)
from pruning_core.evaluation.results import (
    ScoreResult,
    load_mask,
    load_scores,
    mask_to_json,
    read_json,
    write_json,
)

LAYOUT = HeadLayout({"encoder_self": (4, 4), "decoder_self": (4, 4), "cross": (4, 4)})


def test_mask_json_matches_the_fixed_format(tmp_path):
    mask = HeadMask.from_removed(LAYOUT, [("cross", 1, 0)])
    data = mask_to_json(mask, "tiny")
    assert data == {"format": "headprune.mask/1", "model": "tiny",
                    "kinds": {"encoder_self": [[1] * 4] * 2, "decoder_self": [[1] * 4] * 2,
                              "cross": [[1] * 4, [0, 1, 1, 1]]}}
    write_json(tmp_path / "m.json", data)
    assert load_mask(tmp_path / "m.json", LAYOUT) == mask


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"kinds": {}}', "no 'format' field"),
    ('{"format": "headprune.scores/1", "kinds": {}}', "a 'headprune.scores/1' file"),
    ('{"format": "headprune.mask/2", "kinds": {}}', "version '2'"),
    ('{"format": "headprune.mask/1", "kinds": {"encoder_self": [[1, 1, 1, 1]]}}', "attention kinds"),
    ('{"format": "headprune.mask/1", "kinds": {"encoder_self": [[1,1,1,1],[1,1,1]], "decoder_self": [[1,1,1,1],[1,1,1,1]], "cross": [[1,1,1,1],[1,1,1,1]]}}', "heads per layer"),
    ('{"format": "headprune.mask/1", "kinds": {"encoder_self": [[1,1,1,2],[1,1,1,1]]}}', "0 \\(removed\\) or 1"),
])
def test_bad_mask_files_get_clear_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(FormatError, match=message):
        load_mask(path, LAYOUT)


def test_missing_file_error(tmp_path):
    with pytest.raises(FormatError, match="does not exist"):
        read_json(tmp_path / "nope.json")


def test_scores_roundtrip_and_shape_check(tmp_path):
    scores = HeadScores.from_lists({k: [[0.1, 0.4, 0.2, 0.3], [1.0, 2.0, 3.0, 4.0]] for k in LAYOUT.kinds})
    res = ScoreResult("gradient", scores, True, {"model": "tiny"})
    write_json(tmp_path / "s.json", res.to_json())
    again = load_scores(tmp_path / "s.json", LAYOUT)
    assert again.scores == scores and again.normalize and again.method == "gradient"
    data = res.to_json()
    assert data["format"] == "headprune.scores/1" and data["normalized"] is True
    with pytest.raises(FormatError, match="attention kinds"):
        load_scores(tmp_path / "s.json", HeadLayout({"encoder_self": (4, 4)}))
    bad = dict(data, raw_kinds={"encoder_self": [[float("nan")] * 4] * 2})
    with pytest.raises(FormatError, match="NaN"):
        ScoreResult.from_json(bad)


def test_atomic_write_leaves_no_partial_file(tmp_path):
    path = tmp_path / "out.json"
    write_json(path, {"format": "x/1", "a": 1})
    with pytest.raises(TypeError):
        write_json(path, {"format": "x/1", "bad": object()})
    assert json.loads(path.read_text()) == {"format": "x/1", "a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_normalisation_and_ranking():
    s = HeadScores.from_lists({"encoder_self": [[3.0, 4.0], [0.0, 0.0]]})
    assert s.normalized_per_layer().kinds["encoder_self"] == ((0.6, 0.8), (0.0, 0.0))
    assert s.ranked(seed=1)[-1] == ("encoder_self", 0, 1)


def test_presets():
    scores = HeadScores.from_lists({"encoder_self": [[0.1, 0.5, 0.3, 0.9], [0.2, 0.1, 0.4, 0.35]]})
    glob = remove_least_important(scores, 0.5)
    assert glob.n_kept == 4 and set(glob.removed()) == {("encoder_self", 0, 0), ("encoder_self", 1, 1),
                                                         ("encoder_self", 1, 0), ("encoder_self", 0, 2)}
    per = remove_least_important(scores, 0.5, per_layer=True)
    assert [sum(r) for r in per.kinds["encoder_self"]] == [2, 2]
    assert keep_top_per_layer(scores, 1).kinds["encoder_self"] == ((0, 0, 0, 1), (0, 0, 1, 0))
    rnd = random_per_layer(scores.layout, 0.5, seed=1)
    assert [sum(r) for r in rnd.kinds["encoder_self"]] == [2, 2]
    assert rnd == random_per_layer(scores.layout, 0.5, seed=1)
    with pytest.raises(HeadpruneError, match="between 0 and 1"):
        remove_least_important(scores, 1.5)


def test_per_layer_share_is_one_rule():
    """Removing a share per layer removes round(share * n) heads (halves to even) in every preset."""
    assert [removed_per_layer(n, 0.5) for n in (12, 5, 4, 3, 2, 1)] == [6, 2, 2, 2, 1, 0]
    layout = HeadLayout({"encoder_self": (12, 5, 3, 1)})
    scores = HeadScores.from_lists({"encoder_self": [[float(h) for h in range(n)] for n in (12, 5, 3, 1)]})
    top = keep_top_fraction_per_layer(scores, 0.5)
    assert top.kinds["encoder_self"] == ((0,) * 6 + (1,) * 6, (0, 0, 1, 1, 1), (0, 0, 1), (1,))
    assert top == remove_least_important(scores, 0.5, per_layer=True)
    assert [sum(r) for r in random_per_layer(layout, 0.5, seed=2).kinds["encoder_self"]] == [6, 3, 1, 1]


def test_mask_edits_return_new_masks():
    m = HeadMask.full(LAYOUT)
    t = m.toggled("cross", 0, 3)
    assert m.is_full() and t.n_kept == m.n_total - 1 and t.toggled("cross", 0, 3) == m
    assert t.inverted().n_kept == 1


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"


def test_a_kinds_file_written_before_the_codec_reads_and_writes_back_the_same():
    """tests/fixtures/formats/kinds-1.json was written by the hand-written KindSensitivity.to_json."""
    from pruning_core.evaluation.kinds import KindSensitivity

    data = json.loads((FIXTURES / "kinds-1.json").read_text())
    result = KindSensitivity.from_json(data)
    assert result.points[0].seed is None and result.points[1].low is None and result.missing == ("decoder_self",)
    assert result.to_json() == data and list(result.to_json()) == list(data)      # same keys, same order
    with pytest.raises(FormatError, match="attention-kinds file is malformed"):
        KindSensitivity.from_json({k: v for k, v in data.items() if k != "points"})


def test_a_one_per_layer_file_written_before_the_codec_reads_and_writes_back_the_same():
    """tests/fixtures/formats/one_per_layer-1.json was written by the hand-written OnePerLayerResult.to_json."""
    from pruning_core.evaluation.experiments import OnePerLayerResult

    data = json.loads((FIXTURES / "one_per_layer-1.json").read_text())
    result = OnePerLayerResult.from_json(data)
    assert result.rows[1].kept_head == 0 and result.selection == "scores:gradient"
    assert result.to_json() == data and list(result.to_json()) == list(data)
    with pytest.raises(FormatError, match="one-per-layer file is malformed"):
        OnePerLayerResult.from_json({**data, "rows": [{"kind": "encoder_self"}]})


@pytest.mark.parametrize("name", ["verify-1.json", "verify-1-constant.json"])
def test_a_verify_file_written_before_the_codec_reads_and_writes_back_the_same(name):
    """tests/fixtures/formats/verify-1*.json were written by the hand-written VerifyResult.to_json."""
    from pruning_core.scoring.verify import VerifyResult

    data = json.loads((FIXTURES / name).read_text())
    result = VerifyResult.from_json(data)
    assert result.to_json() == data and list(result.to_json()) == list(data)
    assert VerifyResult.from_json({k: v for k, v in data.items() if k not in ("seconds", "provenance")}) == \
        VerifyResult(result.method, result.k, result.spearman, result.base_loss, result.n_examples, result.pairs)
    with pytest.raises(FormatError, match="verify K"):
        VerifyResult.from_json({**data, "k": "one"})


@pytest.mark.parametrize("name, module, cls", [
    ("ablation-1.json", "pruning_core.evaluation.experiments", "AblationResult"),
    ("curve-1.json", "pruning_core.evaluation.experiments", "CurveResult"),
    ("dynamics-1.json", "pruning_core.analysis.dynamics", "DynamicsResult"),
    ("smp_compare-1.json", "pruning_core.scoring.smp.compare", "CompareResult"),
])
def test_a_file_written_by_hand_before_the_codec_reads_and_writes_back_the_same(name, module, cls):
    """tests/fixtures/formats/{ablation,curve,dynamics,smp_compare}-1.json were written by hand-written
    ``to_json`` methods; the codec reads them and writes the same keys and values back."""
    import importlib

    record = getattr(importlib.import_module(module), cls)
    data = json.loads((FIXTURES / name).read_text())
    result = record.from_json(data)
    assert json.loads(json.dumps(result.to_json())) == data
    with pytest.raises(FormatError, match="is a 'headprune.mask/1' file, but a 'headprune"):
        record.from_json({**data, "format": "headprune.mask/1"})


@pytest.mark.parametrize("name, module, cls", [
    ("info-1.json", "pruning_core.cli.model", "ModelInfo"),
    ("compress-1.json", "pruning_core.compress.compress", "CompressReport"),
    ("causal-1.json", "pruning_core.analysis.causal", "CausalResult"),
    ("smp_train-1.json", "pruning_core.cli.smp", "TrainSummary"),
    ("smp_pruner-1.json", "pruning_core.scoring.smp.pruner", "PrunerRecord"),
])
def test_a_file_written_as_a_dict_literal_before_its_record_reads_and_writes_back_the_same(name, module, cls):
    """tests/fixtures/formats/{info,compress,causal,smp_train,smp_pruner}-1.json were written by the CLI's dict
    literals (``headprune info``, ``compress``, ``causal-test``, ``smp train`` and the saved pruner's
    ``pruner.json``, on tiny models); their records read them and write the same keys, in the same order."""
    import importlib

    record = getattr(importlib.import_module(module), cls)
    data = json.loads((FIXTURES / name).read_text())
    result = record.from_json(data)
    again = json.loads(json.dumps(result.to_json()))
    assert again == data and list(again) == list(data)
    with pytest.raises(FormatError, match="is a 'headprune.mask/1' file, but a 'headprune"):
        record.from_json({**data, "format": "headprune.mask/1"})


def test_the_ablation_and_curve_records_keep_their_derived_and_nested_values():
    from pruning_core.evaluation.experiments import AblationResult, CurveResult

    ablation = AblationResult.from_json(json.loads((FIXTURES / "ablation-1.json").read_text()))
    assert ablation.note == "2 heads tested" and (ablation.n_significant_raw, ablation.n_significant_holm) == (1, 0)
    curve = CurveResult.from_json(json.loads((FIXTURES / "curve-1.json").read_text()))
    assert curve.seeds == (0, 1, 2) and curve.points[0].per_example == (1, 0, 1) and curve.points[1].low is None
    with pytest.raises(FormatError, match="curve file is malformed"):
        CurveResult.from_json({**json.loads((FIXTURES / "curve-1.json").read_text()), "points": [{"metric": 1.0}]})


def test_configs_and_records_write_what_they_wrote_before_the_codec():
    """records-before-codec.json holds what the hand-written ``to_json`` of each wrote."""
    from pruning_core.analysis.dynamics import DynamicsConfig
    from pruning_core.compress.search import SearchResult
    from pruning_core.scoring.smp.compare import CompareConfig
    from pruning_core.scoring.smp.pruner import PrunerConfig
    from pruning_core.scoring.smp.train import TrainConfig
    from pruning_core.tasks.finetune import FinetuneStats

    before = json.loads((FIXTURES / "records-before-codec.json").read_text())
    mask = HeadMask.from_removed(HeadLayout({"encoder_self": (2, 2)}), [("encoder_self", 1, 0)])
    stats = FinetuneStats(3, 1.0, 8, 0.5, 0.7, 1.0, 2.0, 1024, None, "process_rss_peak", "cpu", (0.7, 0.6, 0.5))
    now = {"pruner_config": PrunerConfig(), "smp_train_config": TrainConfig(), "compare_config": CompareConfig(),
           "dynamics_config": DynamicsConfig(), "finetune_stats": stats,
           "search_result": SearchResult(mask, 1, 2, 0.9, 0.75, 128, {"budget_ms": 3.0})}
    assert {k: json.loads(json.dumps(v.to_json())) for k, v in now.items()} == before
    assert "losses" not in before["finetune_stats"]                      # kept in memory, never written
    assert PrunerConfig.from_json(before["pruner_config"]) == PrunerConfig()
    assert TrainConfig.from_json(before["smp_train_config"]) == TrainConfig()
    assert SearchResult.from_json(before["search_result"]).mask == mask
    with pytest.raises(FormatError, match="pruner config is incomplete"):
        PrunerConfig.from_json({**before["pruner_config"], "map_size": 2})


def test_only_custom_wire_forms_write_json_by_hand():
    """Every ``to_json`` written by hand in the library says why on its first lines ("# by hand: ...");
    the others come from pruning_core/core/io/codec.py's JsonRecord."""
    import ast

    root = FIXTURES.parents[2] / "pruning_core"
    unexplained = []
    for path in root.rglob("*.py"):
        if path == root / "core" / "io" / "codec.py":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.FunctionDef) and node.name == "to_json":
                head = "\n".join(lines[node.lineno - 1:node.lineno + 6])
                if "# by hand:" not in head:
                    unexplained.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert not unexplained, "write these with JsonRecord, or say why not:\n" + "\n".join(unexplained)
