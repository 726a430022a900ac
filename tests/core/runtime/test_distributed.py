"""Data-parallel passes under ``torchrun --nproc-per-node 2`` (gloo, CPU) equal one process.

Each torchrun start costs seconds (two interpreters importing transformers), so one launch runs
every library check (tests/distributed_worker.py: classification with 7 examples on 2 ranks,
translation, language model; gradient I_h, evaluation, ablation, curves with and without
re-scoring, SMP; fisher, atp with each baseline, flap, activation, entropy, confidence and the
exact-ablation check) and the CLI commands; a second launch makes rank 1 fail on purpose.
"""
from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pruning_core.core.runtime import distributed
from pruning_core.cli.main import main
from pruning_core.cli.args import parse_device_map
from pruning_core.core.errors import UsageError
from tiny import make_bert_tokenizer, tiny_model

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).resolve().parents[2] / "distributed_worker.py"
FAILING = Path(__file__).resolve().parents[2] / "failing_rank.py"     # the CLI with rank 1 failing
TIMEOUT = 240

CLI_RUNS = {
    "score": "score tiny --task file:tiny7.csv --score-split test --batch-size 2 --method gradient",
    "evaluate": "evaluate tiny --task file:tiny7.csv --batch-size 2",
    "ablate": "ablate tiny --task file:tiny7.csv --batch-size 3",
    "curve": "curve tiny --task file:tiny7.csv --score-split test --step 0.25 --rescore --batch-size 2",
}


def torchrun(args: list[str], cwd: Path, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", **(extra_env or {})}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):      # a test run itself under torchrun: start afresh
        env.pop(key, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def dist_dir(tmp_path_factory):
    work = tmp_path_factory.mktemp("dist")
    tiny_model("bert").save_pretrained(work / "tiny")
    make_bert_tokenizer(work / "tiny")
    rng = random.Random(0)
    words = "good bad movie film great awful plot acting fun dull love hate".split()
    lines = ["text,label"] + [" ".join(rng.choice(words) for _ in range(rng.randint(2, 8))) + f",{i % 2}"
                              for i in range(7)]
    (work / "tiny7.csv").write_text("\n".join(lines) + "\n")
    (work / "home").mkdir()
    return work


@pytest.fixture(scope="module")
def launched(dist_dir):
    """One torchrun launch: the library checks, then the CLI commands with --out into dist-*.json."""
    (dist_dir / "cli_runs.txt").write_text("\n".join(f"{cmd} --out dist-{name}.json" for name, cmd in CLI_RUNS.items())
                                          + "\n")
    proc = torchrun([str(WORKER), str(dist_dir)], dist_dir, {"HEADPRUNE_HOME": str(dist_dir / "home")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((dist_dir / "library.json").read_text()), proc


# I_h is a float32 sum over examples; under torchrun each rank sums its share and the all-reduce adds
# the partial sums, so the same terms are added in another order. Float32 rounding differs by about
# 1e-7 relative per addition (eps 1.2e-7) and a sum of n terms by up to about n * 1e-7; 1e-5 relative
# covers the few hundred terms these tests sum on any CPU. A value that should be zero gets the
# absolute bound instead. Metrics (counts of right answers, gathered losses) stay exact.
F32_REORDER_REL = 1e-5
F32_REORDER_ABS = 1e-7


def _close(a, b, rel=F32_REORDER_REL, abs_=F32_REORDER_ABS, path="") -> None:
    """Equal structures; floats equal up to ``rel`` (the all-reduced sums), everything else exactly."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], rel, abs_, f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, rel, abs_, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=rel, abs_tol=abs_), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.mark.parametrize("check", ["cls_gradient_bs2", "cls_gradient_bs32", "smp_logits_bs2", "smp_logits_bs32",
                                   "smp_scores", "tr_gradient", "lm_gradient", "cls_fisher_zero", "cls_atp_zero",
                                   "cls_atp_mean", "cls_atp_corrupt", "cls_flap_zero", "cls_activation_zero",
                                   "cls_entropy_zero", "cls_confidence_zero", "cls_verify", "lm_atp_corrupt",
                                   "lm_flap_zero"])
@pytest.mark.heavy
def test_all_reduced_scores_equal_one_process(launched, check):
    results, _ = launched
    pair = results[check]
    # the NEW_SCORERS add float64 per-batch sums of float32 values (as I_h does): the F32 bounds hold
    # SMP sums float32 logits (as one process does); its scores are a softmax, so a logit's rounding
    # difference shows up as an absolute difference of the probabilities
    rel, abs_ = (1e-5, 1e-4) if check.startswith("smp") else (F32_REORDER_REL, F32_REORDER_ABS)
    _close(pair["distributed"], pair["single"], rel=rel, abs_=abs_, path=check)


@pytest.mark.parametrize("check", ["cls_evaluate_bs2", "cls_evaluate_bs32", "cls_ablation", "cls_ablation_scorer",
                                   "cls_curve_rescoreFalse", "cls_curve_rescoreTrue", "tr_evaluate", "lm_evaluate"])
@pytest.mark.heavy
def test_metrics_equal_one_process_exactly(launched, check):
    results, _ = launched
    pair = results[check]
    assert pair["distributed"] == pair["single"], check       # metrics, losses, intervals, per-example: exact


@pytest.mark.heavy
def test_uneven_split_counts_every_example_once(launched):
    results, _ = launched
    assert results["_sizes"]["cls"] == 7                  # 7 examples on 2 ranks, batches of 2 and 32
    for bs in (2, 32):
        ev = results[f"cls_evaluate_bs{bs}"]["distributed"]
        assert ev["n_examples"] == 7 and len(ev["per_example"]) == 7 and None not in ev["per_example"]
    assert results["_world"] == {"world_size": 2, "backend": "gloo", "devices": ["cpu", "cpu"]}


def _strip(data: dict) -> dict:
    """A result file without what differs between runs by design (time, seconds, the parallel setup)."""
    out = {k: v for k, v in data.items() if k not in ("seconds",)}
    if "provenance" in out:
        out["provenance"] = {k: v for k, v in out["provenance"].items() if k not in ("created", "parallel")}
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("name", list(CLI_RUNS))
def test_cli_under_torchrun_writes_what_one_process_writes(launched, dist_dir, monkeypatch, name):
    monkeypatch.chdir(dist_dir)
    monkeypatch.setenv("HEADPRUNE_HOME", str(dist_dir / "home"))
    assert main(CLI_RUNS[name].split() + ["--out", f"single-{name}.json"]) == 0
    dist = json.loads((dist_dir / f"dist-{name}.json").read_text())
    single = json.loads((dist_dir / f"single-{name}.json").read_text())
    assert dist["provenance"]["parallel"] == {"world_size": 2, "backend": "gloo", "devices": ["cpu", "cpu"]}
    assert single["provenance"]["parallel"] == {"world_size": 1, "backend": None, "devices": ["cpu"]}
    if name in ("evaluate", "ablate"):                     # gathered per-example results: exact
        assert _strip(dist) == _strip(single), name
    else:                                                  # scores: float32 sums in another order
        _close(_strip(dist), _strip(single), path=name)


@pytest.mark.heavy
def test_only_rank_0_prints_results(launched):
    _, proc = launched
    assert proc.stdout.count("wrote dist-score.json") == 1


@pytest.mark.heavy
def test_a_rank_failing_mid_run_stops_every_rank_and_writes_nothing(dist_dir):
    out = dist_dir / "failed.json"
    before = set(dist_dir.iterdir())
    proc = torchrun([str(FAILING), "score", "tiny", "--task", "file:tiny7.csv", "--score-split", "test",
                     "--batch-size", "2", "--out", str(out)], dist_dir, {"HEADPRUNE_HOME": str(dist_dir / "home")})
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "headprune: error: [rank 1 of 2] rank 1 failed on purpose" in text, text[-3000:]
    assert "headprune: error: [rank 0 of 2] rank 1 of 2 failed during gradient scoring" in text, text[-3000:]
    assert "writes nothing" in text
    assert not out.exists()
    assert set(dist_dir.iterdir()) == before               # no half-written or temporary file either


# -- without torchrun (fast) -----------------------------------------------------------------------

def test_distributed_without_torchrun_is_a_clear_usage_error(dist_dir, monkeypatch, capsys):
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(dist_dir)
    assert main(["evaluate", "tiny", "--task", "file:tiny7.csv", "--distributed"]) == 2
    err = capsys.readouterr().err
    assert "torchrun" in err and "WORLD_SIZE" in err


def test_commands_that_run_in_one_process_refuse_torchrun(dist_dir, monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.chdir(dist_dir)
    assert main(["info", "tiny"]) == 2
    assert "runs in one process" in capsys.readouterr().err
    assert main(["compress", "tiny", "--task", "file:tiny7.csv", "--remove", "0.5", "--out", "c"]) == 2
    assert "runs in one process" in capsys.readouterr().err and not (dist_dir / "c").exists()


def test_compress_does_not_offer_distributed(capsys):
    with pytest.raises(SystemExit):
        main(["compress", "tiny", "--task", "t", "--remove", "0.5", "--out", "c", "--distributed"])
    assert "unrecognized arguments: --distributed" in capsys.readouterr().err


def test_single_process_provenance_and_no_sharding():
    assert distributed.current() is None and distributed.batch_part() is None and distributed.is_writer()
    assert distributed.describe("cpu") == {"world_size": 1, "backend": None, "devices": ["cpu"]}
    assert distributed.gather(3, "x") == [3]
    distributed.agree()                                   # no-op alone


def test_batches_part_covers_every_example_once():
    from pruning_core.tasks.batching import EncodedData

    class Collate:
        def _collate(self, data, idx, device):
            return list(idx)

    data = EncodedData(task=Collate(), split="x", n_examples=7, fingerprint="", texts=[], references=None,
                       lengths=[5, 1, 4, 2, 7, 3, 6])
    whole = list(data.batches(2))
    shares = [list(data.batches(2, part=(r, 2))) for r in range(2)]
    assert shares == [whole[0::2], whole[1::2]]
    assert sorted(i for s in shares for b in s for i in b) == list(range(7))
    assert [data.n_batches(2, (r, 2)) for r in range(2)] == [2, 2] and data.n_batches(32, (1, 2)) == 0
    assert list(data.batches(32, part=(1, 2))) == []


@pytest.mark.parametrize("value, expected", [("auto", "auto"), ("cpu", "cpu"), ('{"bert": "cpu"}', {"bert": "cpu"})])
def test_device_map_values(value, expected):
    assert parse_device_map(value) == expected


def test_bad_device_map_names_the_choices():
    with pytest.raises(UsageError, match="auto, balanced"):
        parse_device_map("everywhere")


def test_rank_devices_and_torchrun_detection(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert distributed.local_device("cpu") == "cpu"
    if not __import__("torch").cuda.is_available():
        assert distributed.local_device(None) == "cpu"
        with pytest.raises(UsageError, match="no CUDA GPU"):
            distributed.local_device("cuda")
    for size, expected in (("1", False), ("2", True)):
        monkeypatch.setenv("WORLD_SIZE", size)
        monkeypatch.setenv("RANK", "0")
        assert distributed.launched_by_torchrun() is expected
