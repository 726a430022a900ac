"""Run by ``torchrun --nproc-per-node 2`` from tests/core/runtime/test_distributed.py: every data pass on tiny models,
data-parallel and then (on rank 0, the group hidden) as one process; rank 0 writes both to OUT/library.json.

Then the CLI commands listed in ``CLI_RUNS`` (as the test gives them, one per line of ``cli_runs.txt``)
run under the same group and write their ``--out`` files for the test to compare with single-process runs.

Usage: distributed_worker.py WORKDIR (holding tiny/, tiny7.csv and cli_runs.txt; results go there too)
"""
from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]            # this checkout's library, then tests/ (tiny.py)

import torch  # noqa: E402

torch.set_num_threads(1)

from pruning_core.core.runtime import distributed  # noqa: E402
from pruning_core.evaluation.experiments import ablation_table, pruning_curve  # noqa: E402
from pruning_core.scoring import ScoreConfig, get_scorer  # noqa: E402
from pruning_core.scoring.gradient import per_token_importance  # noqa: E402
from pruning_core.scoring.verify import verify_scores  # noqa: E402
from pruning_core.tasks.classification import ClassificationTask  # noqa: E402
from pruning_core.tasks.language_model import LanguageModelTask, text_loader  # noqa: E402
from pruning_core.tasks.translation import TranslationTask  # noqa: E402
from tiny import synthetic_sentiment, tiny_loaded  # noqa: E402

WORDS = "the a good bad movie film great awful plot acting fun dull love hate it was is not very really".split()


def sentences(n: int, seed: int) -> list[str]:
    import random
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def eval_json(res) -> dict:
    out = res.to_json({})
    out.pop("seconds", None)
    out.pop("provenance", None)
    return out


def scores_json(scores) -> dict:
    return scores.to_json()


NEW_SCORERS = [("fisher", "zero"), ("atp", "zero"), ("atp", "mean"), ("atp", "corrupt"), ("flap", "zero"),
               ("activation", "zero"), ("entropy", "zero"), ("confidence", "zero")]


def verify_json(check) -> dict:
    out = check.to_json()
    out.pop("seconds", None)
    out.pop("provenance", None)
    return out


def curve_json(curve) -> list:
    return [asdict(p) for p in curve.points]


def both(results: dict, name: str, run) -> None:
    """``run()`` data-parallel on every rank, then alone on rank 0; rank 0 keeps both."""
    dist_value = run()
    if distributed.is_writer():
        with distributed.single_process():
            results[name] = {"distributed": dist_value, "single": run()}


def library_checks(work: Path, rank: int) -> dict:
    results: dict = {}
    own = work / f"rank{rank}"                                   # tokenizer files: one folder per rank
    # classification: 7 examples, uneven over 2 ranks
    bert = tiny_loaded("bert", own, seed=0)
    rows = synthetic_sentiment(7, seed=3)
    cls = ClassificationTask("syn7", lambda split, limit: rows[:limit], splits=("validation",),
                             default_split="validation")
    data = cls.encode(bert, "validation")
    for bs in (2, 32):                                           # 32: rank 1 gets no batch at all
        both(results, f"cls_gradient_bs{bs}",
             lambda bs=bs: per_token_importance(bert, cls, data, batch_size=bs).to_json())
        both(results, f"cls_evaluate_bs{bs}", lambda bs=bs: eval_json(cls.evaluate(bert, data, batch_size=bs)))
    both(results, "cls_ablation", lambda: [asdict(r) for r in ablation_table(bert, cls, data, batch_size=3).rows])
    gradient = get_scorer("gradient")
    config = ScoreConfig(split="validation", limit=None, batch_size=2)
    for rescore in (False, True):
        both(results, f"cls_curve_rescore{rescore}",
             lambda rescore=rescore: curve_json(pruning_curve(bert, cls, data, gradient, config, step=0.25,
                                                              rescore=rescore, batch_size=2)))
    both(results, "cls_ablation_scorer",
         lambda: get_scorer("ablation").score(bert, cls, config).scores.to_json())
    for name, baseline in NEW_SCORERS:                           # the NEW_SCORERS, all-reduced sums
        cfg = ScoreConfig(split="validation", limit=None, batch_size=2, baseline=baseline)
        both(results, f"cls_{name}_{baseline}",
             lambda name=name, cfg=cfg: get_scorer(name).score(bert, cls, cfg).scores.to_json())
    both(results, "cls_verify", lambda: verify_json(verify_scores(bert, cls, data, get_scorer("gradient").score(
        bert, cls, config), 2, batch_size=2)))
    # SMP: the same (seeded) pruner on every rank
    from pruning_core.scoring.smp.pruner import PrunerConfig, PrunerFile, SMPPruner
    from pruning_core.scoring.smp.scorer import SMPScorer, mean_head_logits
    torch.manual_seed(0)
    pruner = SMPPruner(PrunerConfig())
    with torch.no_grad():                        # an untrained pruner's logits barely depend on the input
        for p in pruner.parameters():
            p.add_(torch.randn_like(p))
    pfile = PrunerFile(pruner, "bert-encoder", "bert", {"encoder_self": [4, 4]}, 32, {})
    for bs in (2, 32):
        both(results, f"smp_logits_bs{bs}",
             lambda bs=bs: [t.tolist() for t in mean_head_logits(bert, pfile, data, batch_size=bs)])
    both(results, "smp_scores", lambda: SMPScorer(pfile).score(bert, cls, config).scores.to_json())
    # translation (seq2seq: three attention kinds, BLEU of decoded text)
    marian = tiny_loaded("marian", own, seed=1)
    pairs = [{"source": s, "target": t} for s, t in zip(sentences(7, 1), sentences(7, 2))]
    tr = TranslationTask("tr7", lambda split, limit: pairs[:limit], splits=("validation",), default_split="validation")
    tdata = tr.encode(marian, "validation", max_length=12)
    both(results, "tr_gradient", lambda: per_token_importance(marian, tr, tdata, batch_size=2).to_json())
    both(results, "tr_evaluate", lambda: eval_json(tr.evaluate(marian, tdata, batch_size=2)))
    # language model (windows are the examples; perplexity from summed token losses)
    gpt = tiny_loaded("gpt2", own, seed=2)
    lm = LanguageModelTask("lm", text_loader(lambda split: sentences(5, 4)), splits=("test",), default_split="test")
    ldata = lm.encode(gpt, "test", max_length=4)
    both(results, "lm_gradient", lambda: per_token_importance(gpt, lm, ldata, batch_size=3).to_json())
    both(results, "lm_evaluate", lambda: eval_json(lm.evaluate(gpt, ldata, batch_size=3)))
    for name, baseline in (("atp", "corrupt"), ("flap", "zero")):
        cfg = ScoreConfig(split="test", limit=None, batch_size=3, max_length=4, baseline=baseline)
        both(results, f"lm_{name}_{baseline}",
             lambda name=name, cfg=cfg: get_scorer(name).score(gpt, lm, cfg).scores.to_json())
    if distributed.is_writer():
        results["_sizes"] = {"cls": data.n_examples, "tr": tdata.n_examples, "lm": ldata.n_examples}
    return results


def main() -> None:
    work = Path(sys.argv[1])
    world = distributed.init("cpu")
    results = library_checks(work, world.rank)
    results["_world"] = world.describe() if world.writer else None
    distributed.agree("the library checks")
    if world.writer:
        (work / "library.json").write_text(json.dumps(results))
    from pruning_core.cli.main import main as cli
    for line in (work / "cli_runs.txt").read_text().splitlines():
        code = cli(shlex.split(line))
        assert code == 0, f"rank {world.rank}: `headprune {line}` exited {code}"
    distributed.shutdown()
    left = gloo_threads()       # a group still referenced somewhere keeps them: SIGABRT at exit, now and then
    assert not left, f"rank {world.rank}: gloo threads outlive shutdown(): {left}"


def gloo_threads() -> list[str]:
    """Names of this process's gloo threads (Linux: /proc/self/task/*/comm)."""
    tasks = Path("/proc/self/task")
    names = [(t / "comm").read_text().strip() for t in tasks.iterdir()] if tasks.is_dir() else []
    return [n for n in names if "gloo" in n]


if __name__ == "__main__":
    main()
