"""``headprune compress``: retraining-free compression (Kwon et al. 2022) to a budget, saved as a smaller model.

Score the heads on calibration examples, search the mask the budget allows, rearrange it per layer,
tune the kept heads' scales into W_O (and FLAP's bias compensation into its bias), prune
physically and save; then print the metric of the unpruned model, of the mask without repair and of the
saved model on the evaluation split. The folder is written whole or not at all (built beside ``--out``,
renamed into place), with ``headprune_compress.json``: every step's record and the evaluations.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pruning_core.core.runtime import distributed
from pruning_core.cli.args import checked, fraction, output_folder, positive_int, positive_number
from pruning_core.cli.common import common_options, fmt, load_from_args, progress_bars, require_heads
from pruning_core.core.errors import UsageError

if TYPE_CHECKING:
    from pruning_core.compress import CompressReport

REPORT_NAME = "headprune_compress.json"
DEFAULT_CALIBRATION = 512


def _share(option: str, value: float) -> None:
    if not 0 <= value <= 1:
        raise UsageError(f"{option} must be a fraction from 0 to 1, e.g. 0.5 for half; got {value:g}.")


def add_compress(sub) -> None:
    """Add ``compress`` to the sub-commands ``sub``."""
    p = sub.add_parser("compress", help="prune to a budget without retraining (Kwon et al. 2022) and save the model",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    common_options(p, out=False, distributed=False)       # one process: its search and repair are serial
    next(a for a in p._actions if a.dest == "split").help = (
        "split the metric is measured on (default: test when the task has one: the heads are chosen on "
        "--calibration-split)")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--remove", type=float, help="share of all heads to remove, e.g. 0.5")
    budget.add_argument("--flops", type=float,
                        help="share of one forward pass's multiply-adds to remove (attention, feed-forward and output "
                             "head counted at --seq-len tokens; only attention shrinks, so at most its share)")
    budget.add_argument("--latency-ms", type=float,
                        help="the most milliseconds one forward pass of --latency-batch x --seq-len synthetic tokens "
                             "may take on this machine, measured (median of interleaved runs) under its current load")
    p.set_defaults(option_checks=[*(p.get_default("option_checks") or []), ("remove", "--remove", _share),
                                  ("flops", "--flops", _share), ("latency_ms", "--latency-ms", positive_number)])
    checked(p, "--out", required=True, check=output_folder, help="new folder for the compressed model and its report")
    p.add_argument("--scorer", default="fisher", help="how heads are ranked (default fisher, Kwon et al.'s)")
    p.add_argument("--no-repair", action="store_true", help="skip the least-squares tuning (and bias compensation)")
    checked(p, "--calibration", type=int, default=DEFAULT_CALIBRATION, check=positive_int,
            help=f"calibration examples for scoring, rearrangement and tuning (default {DEFAULT_CALIBRATION})")
    p.add_argument("--calibration-split", default=None,
                   help="split the calibration examples come from (default: train when the task has one)")
    p.add_argument("--no-rearrange", action="store_true", help="skip Kwon's per-layer swaps of the removed heads")
    p.add_argument("--no-bias-compensation", action="store_true",
                   help="do not offer FLAP's bias compensation (the removed heads' mean output added to the output "
                        "projection's bias; by default offered per layer and kept where it lowers the error)")
    p.add_argument("--target", choices=("output", "residual"), default="output",
                   help="what each layer's least squares reproduce: 'output' (default), the output projection's "
                        "output; 'residual', the layer's sum W_O z + b + x before its LayerNorm, so drift from earlier "
                        "pruned layers is corrected too (no better on the default model: benchmarks/compress.py)")
    p.add_argument("--normalize", action="store_true",
                   help="rank per-layer l2-normalised scores (Michel et al.) instead of raw scores across layers")
    p.add_argument("--allow-empty-layers", action="store_true", help="let a layer lose every head")
    checked(p, "--seq-len", type=int, default=128, check=positive_int,
            help="tokens per sequence for --flops and --latency-ms (default 128)")
    checked(p, "--latency-batch", type=int, default=1, check=positive_int,
            help="sequences per timed forward pass for --latency-ms (default 1)")
    p.set_defaults(func=cmd_compress)


def _config(args):
    from pruning_core.compress import Budget, CompressConfig
    kind, value = next((k, v) for k, v in (("remove", args.remove), ("flops", args.flops),
                                           ("latency_ms", args.latency_ms)) if v is not None)
    return CompressConfig(Budget(kind, value), scorer=args.scorer, calibration=args.calibration,
                          split=args.calibration_split, batch_size=args.batch_size, repair=not args.no_repair,
                          rearrange=not args.no_rearrange,
                          bias_compensation=not args.no_bias_compensation, target=args.target,
                          min_heads_per_layer=0 if args.allow_empty_layers else 1, normalize=args.normalize,
                          seq_len=args.seq_len, latency_batch=args.latency_batch)


def eval_split(task, asked: str | None) -> str:
    """--split, else ``test`` when the task has held-out test examples, else its default split."""
    if asked:
        task.check_split(asked)
        return asked
    return "test" if task.distinct_split("test") else task.default_split


def cmd_compress(args) -> None:
    from pruning_core.modeling.sources.loading import save_pruned
    from pruning_core.compress import compress, evaluate_compression, summary_json
    from pruning_core.scoring import get_scorer
    from pruning_core.core.io.storage import staged_folder, write_json
    from pruning_core.tasks import get_task
    if distributed.current() is not None:
        raise UsageError("compress runs in one process; start it without torchrun / --distributed.")
    get_scorer(args.scorer)                                  # an unknown name fails before loading anything
    task = get_task(args.task)
    split = eval_split(task, args.split)
    config = _config(args)
    loaded = load_from_args(args)
    require_heads(loaded, "compress")
    result = compress(loaded, task, config, progress=progress_bars())
    data = task.encode(loaded, split, args.limit)
    evaluations = evaluate_compression(loaded, task, data, result, batch_size=args.batch_size,
                                       progress=progress_bars())
    report = replace(result.report, evaluation={"split": split, **summary_json(evaluations)})
    out = Path(args.out)
    with staged_folder(out) as tmp:
        save_pruned(result.model, loaded.tokenizer, tmp, shortlist=loaded.shortlist)
        write_json(tmp / REPORT_NAME, report.to_json())
    from pruning_core.modeling.pruning import loads_in
    _print(report, evaluations, split, out, loads_in(result.model, str(out), saved_now=True))


def _print(report: CompressReport, evaluations: dict, split: str, out: Path, loads_in: str) -> None:
    search = report.search
    print(f"budget: {report.budget['means']}; removed {report.heads_removed}/{report.heads_total} heads "
          f"({search['flop_fraction']:.1%} of the multiply-adds at {search['flops_counted_at_tokens']} tokens, "
          f"{search['attention_flop_fraction']:.1%} of the attention's); scored by {report.scores['method']} "
          f"on {report.calibration['examples']} {report.calibration['split']} examples")
    if search.get("latency"):
        lat = search["latency"]
        print(f"latency: {lat['measures']}: dense {lat['dense_ms']:.1f} ms, compressed "
              f"{lat.get('measured_ms', lat['dense_ms']):.1f} ms")
    swaps = report.rearrangement.get("swaps")
    print(f"rearrangement: {swaps} swap(s)" if swaps is not None else f"rearrangement: {report.rearrangement['skipped']}")
    layers = report.repair.get("layers")
    if layers:
        before = sum(l["residual_before"] for l in layers)
        after = sum(l["residual_after"] for l in layers)
        print(f"repair: layer-output error (mean squared, summed over layers) {before:.4g} -> {after:.4g} on "
              f"{report.repair['calibration_examples']} calibration examples")
    ev = evaluations["unpruned"]
    line = f"{ev.metric_name} on {split} ({ev.n_examples} examples): unpruned {fmt(ev.metric_name, ev.metric)}"
    line += f", pruned without repair {fmt(ev.metric_name, evaluations['pruned'].metric)}"
    if "repaired" in evaluations:
        line += f", with repair {fmt(ev.metric_name, evaluations['repaired'].metric)}"
    print(line)
    params = report.parameters
    print(f"parameters {params['before']:,} -> {params['after']:,}; {report.seconds['total']:.0f} s to compress; "
          f"saved to {out} (report {REPORT_NAME})")
    print(f"loads in {loads_in}")
