"""Does the SMP pruner trained on MiniLM-L6 transfer to MPNet-base (12 x 12 heads)?

    .venv/bin/python benchmarks/smp_transfer.py                     # the reduced budget below
    .venv/bin/python benchmarks/smp_transfer.py --steps 60 --eval 1012

From the same pretrained all-mpnet-base-v2 (unpacked from its PyPI wheels, one seeded 2-class head
for every arm), half of every layer's heads (6 of 12) are removed physically, then the pruned model
is fine-tuned on movie-sentiment with one identical, reduced budget and evaluated on the test split.

What it measures and writes, in full: benchmarks/README.md, ``smp_transfer.py``.
"""
from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.modeling.sources import catalog  # noqa: E402
from pruning_core.tasks.finetune import FinetuneConfig, finetune_classifier  # noqa: E402
from pruning_core.core.heads import HeadMask  # noqa: E402
from pruning_core.modeling.sources.loading import LoadedModel, load_model  # noqa: E402
from pruning_core.modeling.presets import keep_top_fraction_per_layer, random_per_layer  # noqa: E402
from pruning_core.modeling.pruning import parameter_count, prune_heads  # noqa: E402
from pruning_core.evaluation.results import provenance, write_json  # noqa: E402
from pruning_core.scoring import ScoreConfig, get_scorer  # noqa: E402
from pruning_core.scoring.smp.pruner import head_logits, scores_from_logits  # noqa: E402
from pruning_core.scoring.smp.scorer import resolve_pruner  # noqa: E402
from pruning_core.evaluation.stats import mcnemar_exact, paired_correctness, wilson_interval  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.smp_transfer/1"
KEEP = 0.5


@torch.no_grad()
def smp_scores(loaded: LoadedModel, pfile, data, batch_size: int = 16):
    """The pruner's per-layer scores from MPNet's eager attention probabilities (relative bias included)."""
    pruner = pfile.pruner.eval()
    sums, n = None, 0
    for batch in data.batches(batch_size):
        am = batch.token_masks["encoder_self"]                                   # [B, T], 1 = token
        maps = list(loaded.model(**batch.inputs, output_attentions=True).attentions)  # per layer [B, 12, T, T]
        rows = head_logits(pruner, maps, am, reduce=False)                       # per layer [B, 12]
        part = [r.sum(0) for r in rows]
        sums = part if sums is None else [a + b for a, b in zip(sums, part)]
        n += batch.n_examples
    return scores_from_logits(loaded, [s / n for s in sums])


def run_arm(name: str, base: LoadedModel, mask: HeadMask | None, task, train, test_data_for, cfg: FinetuneConfig,
            eval_limit: int) -> tuple[dict, LoadedModel]:
    model = copy.deepcopy(base.model)
    if mask is not None:
        model = prune_heads(model, mask)
    loaded = base.derive(model, f"mpnet-{name}")
    stats = finetune_classifier(loaded.model, loaded.tokenizer, train, cfg)
    loaded.model.eval()
    res = task.evaluate(loaded, test_data_for(loaded), batch_size=64)
    k = round(res.metric * res.n_examples)
    row = {"arm": name, "accuracy": res.metric, "interval95": list(wilson_interval(k, res.n_examples)),
           "loss": res.loss, "n_eval": res.n_examples, "heads_kept": loaded.layout.total_heads,
           "parameters": parameter_count(loaded.model), "finetune": stats.to_json(), "eval_seconds": res.seconds,
           "mask": mask.to_json() if mask is not None else None, "per_example": list(res.per_example)}
    print(f"{name:>10}: accuracy {res.metric:.4f} [{row['interval95'][0]:.3f}, {row['interval95'][1]:.3f}] on "
          f"{res.n_examples}; fine-tuning {stats.seconds:.0f} s, loss {stats.first_train_loss:.3f} -> "
          f"{stats.final_train_loss:.3f}", flush=True)
    return row, loaded


def overlap(a: HeadMask, b: HeadMask) -> float:
    """Share of kept heads the two masks have in common."""
    ka = {(k, l, h) for k, rows in a.kinds.items() for l, r in enumerate(rows) for h, v in enumerate(r) if v}
    kb = {(k, l, h) for k, rows in b.kinds.items() for l, r in enumerate(rows) for h, v in enumerate(r) if v}
    return len(ka & kb) / max(len(ka), 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="fine-tuning steps per arm (identical for all)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--eval", type=int, default=400, help="test examples evaluated per arm (first N)")
    ap.add_argument("--score-texts", type=int, default=256, help="training texts SMP and I_h score")
    ap.add_argument("--seeds", type=int, default=3, help="random arms")
    ap.add_argument("--no-full", action="store_true", help="skip the unpruned arm")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", type=Path, default=RESULTS / "smp_transfer.json")
    args = ap.parse_args(argv)
    import transformers
    transformers.logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    task = get_task("movie-sentiment")
    cfg = FinetuneConfig(epochs=1, max_steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                         max_length=args.max_length, seed=0, device="cpu")
    train = task.load("train")
    pfile = resolve_pruner(None)
    from pruning_core.zoo.mpnet import base_classifier, fetch_pretrained
    with tempfile.TemporaryDirectory(prefix="smp-transfer-") as work:
        model, tokenizer = base_classifier(fetch_pretrained(Path(work) / "pretrained"))
    tmp = LoadedModel(model=model.eval(), tokenizer=tokenizer, model_id="all-mpnet-base-v2", source="memory",
                      task_type="classification", arch="mpnet", weights_sha256="")
    base = tmp.derive(model.eval(), "all-mpnet-base-v2 (pretrained, seeded 2-class head)")

    def test_data_for(loaded):
        return task.encode(loaded, "test", args.eval, max_length=args.max_length)

    t0 = time.perf_counter()
    score_data = task.encode(base, "train", args.score_texts, max_length=args.max_length)
    smp = smp_scores(base, pfile, score_data)
    masks = {"smp": keep_top_fraction_per_layer(smp, KEEP)}
    smp_seconds = time.perf_counter() - t0
    for s in range(args.seeds):
        masks[f"random_{s}"] = random_per_layer(base.layout, 1 - KEEP, seed=s)
    rows, full_model = {}, None
    if not args.no_full:
        rows["full"], full_model = run_arm("full", base, None, task, train, test_data_for, cfg, args.eval)
    ih_source = "prepared mpnet (fine-tuned, headprune prepare --model mpnet)"
    if catalog.get("mpnet").is_prepared():
        ih_model = load_model("mpnet")
    elif full_model is not None:
        ih_model, ih_source = full_model, f"the full arm after its {args.steps}-step fine-tuning (mpnet not prepared)"
    else:
        raise SystemExit("I_h needs the prepared mpnet (`headprune prepare --model mpnet`) or the full arm.")
    t0 = time.perf_counter()
    ih = get_scorer("gradient").score(ih_model, task, ScoreConfig(split="train", limit=args.score_texts,
                                                                  max_length=args.max_length))
    masks["ih"] = keep_top_fraction_per_layer(ih.scores, KEEP)
    ih_seconds = time.perf_counter() - t0
    del ih_model, full_model
    for name in ["smp", "ih"] + [f"random_{s}" for s in range(args.seeds)]:
        rows[name], _ = run_arm(name, base, masks[name], task, train, test_data_for, cfg, args.eval)
    for name, row in rows.items():
        if name != "smp":
            b, c, p = paired_correctness(rows["smp"]["per_example"], row["per_example"])
            row["vs_smp"] = {"smp_right_only": b, "other_right_only": c, "mcnemar_p": p}
    randoms = [rows[f"random_{s}"]["accuracy"] for s in range(args.seeds)]
    summary = {"smp": rows["smp"]["accuracy"], "ih": rows["ih"]["accuracy"],
               "random_mean": sum(randoms) / len(randoms) if randoms else None, "random": randoms,
               "full": rows["full"]["accuracy"] if "full" in rows else None,
               "mask_overlap": {"smp_ih": overlap(masks["smp"], masks["ih"]),
                                **{f"smp_random_{s}": overlap(masks["smp"], masks[f"random_{s}"])
                                   for s in range(args.seeds)}}}
    settings = {"finetune": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}, "train_examples_seen":
                args.steps * args.batch_size, "eval_split": "test", "eval_examples": args.eval,
                "keep_fraction_per_layer": KEEP, "score_texts": args.score_texts, "ih_source": ih_source,
                "smp_maps": "MPNet eager output_attentions (relative-position bias included), pooled by "
                            "smp.pruner.head_logits; the library's family check bypassed on purpose (see docstring)",
                "pruner": {"path": str(pfile.path), "arch": pfile.arch, "model_type": pfile.model_type,
                           "steps": (pfile.provenance.get("settings") or {}).get("steps_done"),
                           "base_model": pfile.provenance.get("model")},
                "threads": torch.get_num_threads()}
    out = {"format": FORMAT, "summary": summary, "arms": rows, "smp_scores": smp.to_json(),
           "ih_scores": ih.scores.to_json(), "selection_seconds": {"smp": smp_seconds, "ih": ih_seconds},
           "seconds": time.perf_counter() - started,
           "provenance": provenance(base, task="movie-sentiment", split="test", n_examples=args.eval,
                                    method="smp_transfer", settings=settings, device="cpu")}
    path = write_json(args.out, out)
    print(f"summary {summary}\nwrote {path} in {out['seconds'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
