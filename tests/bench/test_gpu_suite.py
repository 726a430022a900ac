"""benchmarks/gpu_suite.py on the CPU, so the GPU run cannot rot while no GPU is lent.

One ``--device cpu --quick`` run (tiny shapes of the same four families, about 30-60 s on 2 cores)
must record every section as ``ok`` with sane values; the runner must record a failing section and
go on, and skip what the deadline leaves no time for; the bertology loop the scorer is compared
against must take the same gradient as headprune's gates (else the comparison measures a wrong loop).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_models as gm  # noqa: E402
import gpu_suite as gs  # noqa: E402

SECTIONS = list(gs.SECTIONS)


pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("gpu-suite") / "quick.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), "--device", "cpu", "--quick",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_section_ran_without_error(quick):
    assert quick["format"] == gs.FORMAT
    statuses = {name: entry["status"] for name, entry in quick["sections"].items()}
    errors = {n: e.get("error", {}).get("message") for n, e in quick["sections"].items() if e["status"] != "ok"}
    assert statuses == {name: "ok" for name in SECTIONS}, errors
    assert quick["environment"]["torch"] == torch.__version__ and quick["environment"]["device"] == "cpu"
    assert quick["peak_memory_bytes"] > 0 and quick["provenance"]["method"] == "gpu_suite"
    assert quick["peak_bf16"]["datasheet_flops"] is None            # no datasheet peak for a CPU
    assert quick["code"]["sources_sha256"]


def test_scoring_throughputs(quick):
    scoring = quick["sections"]["scoring"]
    assert set(scoring["models"]) == set(gm.SHAPES)
    for name, row in scoring["models"].items():
        assert set(row["dtypes"]) == {"float32", "bfloat16"}, name
        for dtype, block in row["dtypes"].items():
            assert set(block["methods"]) == set(gs.WORK)
            for method, m in block["methods"].items():
                assert m["examples_per_s"] > 0 and m["flops"] > 0, (name, dtype, method)
                # every synthetic example is exactly seq_len tokens, so tokens/s = examples/s * seq_len
                assert m["tokens_per_s"] == pytest.approx(m["examples_per_s"] * scoring["seq_len"], rel=1e-9)
                assert m["share_of_bf16_peak"] is None                # CPU: no peak to share
            assert block["headprune_over_bertology"] > 0


def test_latency_points_and_ceilings(quick):
    latency = quick["sections"]["latency"]
    sizes = gs.QUICK
    for name, row in latency["models"].items():
        assert row["heads_kept"] * 2 == row["heads_total"], name           # 50 %, whole groups for GQA too
        points = {(p["batch_size"], p["seq_len"]) for p in row["points"]}
        assert points == {(b, s) for b in sizes.batch_sizes for s in sizes.seq_lens}, name
        for p in row["points"]:
            assert p["dense"]["median_s"] > 0 and p["pruned"]["median_s"] > 0 and p["speedup"] > 0
            assert p["ceiling"] > 1                                  # half the heads gone: some work removed
            assert p["fraction_of_ceiling"] == pytest.approx(p["speedup"] / p["ceiling"])


def test_precision_masked_equals_pruned_and_rankings(quick):
    precision = quick["sections"]["precision"]
    assert precision["float32_tolerance"] == gs.F32_MASKED_PRUNED_REL
    for name, row in precision["models"].items():
        f32 = row["masked_vs_pruned"]["float32"]
        assert f32["relative"] <= gs.F32_MASKED_PRUNED_REL and f32["within_tolerance"], (name, f32)
        assert row["masked_vs_pruned"]["bfloat16"]["max_abs_logit"] > 0
        for key in ("spearman_raw", "spearman_normalized"):
            assert row[key] is not None and -1.0 <= row[key] <= 1.0, (name, key)
        assert 0.0 <= row["half_mask_agreement"] <= 1.0


def test_evaluation_device_map_and_torchrun(quick):
    sections = quick["sections"]
    for name, row in sections["evaluate"]["models"].items():
        assert all(row["warm"][k]["median_s"] > 0 for k in ("dense", "masked", "masked_forward_only")), name
        assert 0.0 <= row["metric"] <= 1.0 and row["masked_examples_per_s"] > 0
    dm = sections["device_map"]
    assert dm["within_tolerance"] and set(dm["parameters_by_device"]) == {"cpu"}
    tr = sections["torchrun"]
    assert tr["parallel"] == {"world_size": 1, "backend": "gloo", "devices": ["cpu"]}       # joined a group
    assert tr["single_parallel"]["backend"] is None and tr["within_tolerance"]


# -- the runner: errors, deadline -------------------------------------------------------------------

def test_a_failing_section_is_recorded_and_the_next_still_runs(tmp_path):
    out = tmp_path / "r.json"
    seen = {}

    def boom(ctx, data):
        data["before_failure"] = 1
        raise ValueError("planted failure")

    def fine(ctx, data):
        seen["file"] = json.loads(out.read_text())          # written after the failed section already
        data["value"] = 42

    assert gs.main(["--device", "cpu", "--quick", "--out", str(out), "--sections", "boom,fine"],
                   sections={"boom": boom, "fine": fine}) == 0
    result = json.loads(out.read_text())["sections"]
    assert result["boom"]["status"] == "error" and result["boom"]["before_failure"] == 1
    assert result["boom"]["error"]["type"] == "ValueError" and "planted failure" in result["boom"]["error"]["message"]
    assert "Traceback" in result["boom"]["error"]["traceback"]
    assert result["fine"] == {**result["fine"], "status": "ok", "value": 42}
    assert seen["file"]["sections"]["boom"]["status"] == "error"


def test_a_failing_model_is_recorded_and_the_section_measures_the_others(tmp_path):
    out = tmp_path / "m.json"

    def per_model(ctx, data):
        def measure(name, row):
            if name == "b":
                raise RuntimeError("CUDA out of memory (planted)")
            row["value"] = name
        data["models"] = {}
        ctx.each(data["models"], ["a", "b", "c"], "planted", measure)

    assert gs.main(["--device", "cpu", "--quick", "--out", str(out), "--sections", "per_model"],
                   sections={"per_model": per_model}) == 0
    result = json.loads(out.read_text())["sections"]["per_model"]
    assert result["status"] == "error" and result["failures"] == ["planted b: RuntimeError: CUDA out of memory (planted)"]
    assert result["models"]["a"] == {"value": "a"} and result["models"]["c"] == {"value": "c"}
    assert result["models"]["b"]["error"]["type"] == "RuntimeError"


def test_the_deadline_stops_a_section_and_skips_the_rest(tmp_path):
    out = tmp_path / "d.json"

    def slow(ctx, data):
        data["first_model"] = "measured"
        time.sleep(0.3)
        ctx.check("the second model")

    def never(ctx, data):
        raise AssertionError("ran after the deadline")

    assert gs.main(["--device", "cpu", "--quick", "--out", str(out), "--deadline", "0.2", "--sections",
                    "slow,never"], sections={"slow": slow, "never": never}) == 0
    result = json.loads(out.read_text())["sections"]
    assert result["slow"]["status"] == "partial" and result["slow"]["first_model"] == "measured"
    assert "the second model" in result["slow"]["reason"]
    assert result["never"]["status"] == "skipped" and "deadline" in result["never"]["reason"]


def test_unknown_section_is_refused(capsys):
    with pytest.raises(SystemExit):
        gs.main(["--device", "cpu", "--sections", "scoring,latncy"])
    assert "latncy" in capsys.readouterr().err


# -- the helpers the figures rest on ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["bert-base", "smollm2-135m"])
def test_bertology_head_mask_gradient_equals_headprune_gate_gradient(tmp_path, name):
    """Scaling a head's attention probabilities by m scales its output by m, so bertology's signed
    dL/dm equals headprune's gate gradient: the sum over tokens of a_t . dL/da_t."""
    from pruning_core.modeling.masking import ones_gates
    from pruning_core.scoring.gradient import token_contributions

    loaded = gm.build(gm.SHAPES[name], gm.make_tokenizer(tmp_path / "tok"), torch.device("cpu"), torch.float32,
                      quick=True)
    task = gm.task_for(loaded, gm.write_data(tmp_path / "data", 6, 12))
    data = task.encode(loaded, "test", 6, max_length=12)
    batch = next(data.batches(6))                                 # one batch: |sum| per batch == per run
    contributions = token_contributions(loaded, task, batch, ones_gates(loaded.layout))
    tokens = float(batch.token_masks[loaded.sites[0].kind].sum())
    expected = torch.stack([contributions[(loaded.sites[0].kind, l)].sum((0, 1)).abs() / tokens
                            for l in range(len(loaded.sites))])
    got = gm.bertology_importance(loaded, task, data, batch_size=6, param_grads=False)
    # the same float32 gradient by two routes (through the probabilities vs the head outputs): the
    # sums run in another order, ~1e-6 relative; 1e-4 of the largest value is far below any real error
    assert torch.allclose(got, expected, rtol=0, atol=1e-4 * float(expected.abs().max()))
    assert float(expected.abs().max()) > 0
    assert all(p.grad is None and p.requires_grad for p in loaded.model.parameters())     # restored, no leftovers
    assert loaded.config._attn_implementation == "eager"


def test_grouped_query_half_mask_removes_whole_groups(tmp_path):
    from pruning_core.modeling.architectures import kv_groups_of

    loaded = gm.build(gm.SHAPES["smollm2-135m"], gm.make_tokenizer(tmp_path / "tok"), torch.device("cpu"),
                      torch.float32, quick=True)
    mask, rule = gm.half_mask(loaded)
    assert "key/value groups" in rule and mask.n_kept * 2 == mask.n_total
    for kind, rows in kv_groups_of(loaded.sites).items():
        for layer, groups in enumerate(rows):
            for g in groups:                                          # a group is kept or removed whole
                assert len({mask.kinds[kind][layer][h] for h in g}) == 1
