"""The ``headprune`` command-line tool: one sub-command per library entry point.

Every command prints a human summary on the terminal and, with ``--out FILE``, writes the
result as a headprune JSON file. User errors (HeadpruneError) print their message and exit 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .children import signals_raise
from . import distributed
from .cli_args import (DTYPE_CHOICES, checked, device_map, fraction, int_list, output_file, output_folder,
                       positive_int, parse_device_map, run_checks, write_output)
from .errors import HeadpruneError, UsageError
from .progress import tqdm_progress
from .serving import DATA_DIRS_ENV, LOOPBACK, is_loopback

DEFAULT_SCORE_LIMIT = 512         # examples of the score split (the default split: tasks.default_score_split)


def _common(p: argparse.ArgumentParser, task: bool = True, out: bool = True) -> None:
    p.add_argument("model", help="'default', a local model folder, or a Hugging Face hub id")
    if task:
        p.add_argument("--task", required=True,
                       help="movie-sentiment, movie-text (language models), a GLUE/WMT name (sst2, wmt14-fr-en), "
                            "or file:PATH (.csv, .tsv, .jsonl; .txt for language models)")
        p.add_argument("--split", default=None, help="data split (default: validation; file tasks: test)")
        checked(p, "--limit", type=int, default=None, check=positive_int, help="use at most N examples")
        checked(p, "--batch-size", type=int, default=32, check=positive_int)
    if out:
        checked(p, "--out", check=output_file, help="write the result as JSON to this file")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    checked(p, "--device-map", default=None, check=device_map,
            help="spread a model too large for one GPU over several devices with accelerate: auto, balanced, "
                 "sequential, or a JSON object / .json file {module name: device} (instead of --device)")
    p.add_argument("--dtype", default="auto", choices=DTYPE_CHOICES,
                   help="weights and activations: auto = bfloat16 on a CUDA GPU, float32 on CPU (half precision "
                        "is refused on CPU); recorded in the results' provenance")
    p.add_argument("--allow-pickle", action="store_true",
                   help="accept pytorch_model.bin weights (unpickling can run code: trusted files only)")
    if task:
        p.add_argument("--distributed", action="store_true",
                       help="data-parallel over the processes torchrun started (detected by itself under "
                            "torchrun): `torchrun --nproc-per-node N -m pruning_core ...`; see docs/DISTRIBUTED.md")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headprune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("prepare", help="fetch and build a prepared model (the default classifier unless --model)")
    p.add_argument("--model", default="default", metavar="NAME",
                   help="which prepared model to build (see --list); default: the embedded MiniLM-L6 classifier")
    p.add_argument("--list", action="store_true", help="list the prepared models, whether each is ready, and stop")
    p.add_argument("--force", action="store_true", help="redo everything, even if a valid cache exists")
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("info", help="architecture, heads and parameters of a model")
    _common(p, task=False)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("evaluate", help="metric and loss, optionally under a head mask")
    _common(p)
    _mask_options(p, "a headprune.mask/1 file")
    checked(p, "--beams", type=int, default=1, check=positive_int,
            help="beam size for translation (1 = greedy); other tasks refuse values other than 1")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("score", help="importance score of every head")
    _common(p)
    p.add_argument("--method", default="gradient", help="gradient, random, ablation, smp")
    p.add_argument("--no-normalize", action="store_true", help="rank by raw scores, not per-layer l2-normalised ones")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--score-split", dest="split",
                   help=f"the same as --split: the split the heads are scored on (default: train, "
                        f"first {DEFAULT_SCORE_LIMIT} examples, when the task has one; else the task's own split)")
    checked(p, "--score-limit", dest="limit", type=int, default=None, check=positive_int, help="the same as --limit")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("mask", help="make a mask file from a scores file")
    p.add_argument("scores", help="a headprune.scores/1 file")
    p.add_argument("--remove", type=float, default=None, help="share of heads to remove, e.g. 0.5")
    p.add_argument("--per-layer", action="store_true", help="remove that share in every layer, not globally")
    p.add_argument("--keep-per-layer", type=int, default=None, help="keep only the N best heads of every layer")
    checked(p, "--out", required=True, check=output_file)
    p.set_defaults(func=cmd_mask)

    p = sub.add_parser("ablate", help="single-head ablation table")
    _common(p)
    p.set_defaults(func=cmd_ablate)

    p = sub.add_parser("one-per-layer", help="reduce each layer to its best head, one layer at a time")
    _common(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--scores", help="choose each layer's best head from this scores file (default: search)")
    how.add_argument("--method", help="choose each layer's best head by scoring the heads with this method "
                                      "(on --score-split) (default: search)")
    _score_options(p)
    p.set_defaults(func=cmd_one_per_layer)

    p = sub.add_parser("curve", help="iterative pruning curve: metric as heads are removed")
    _common(p)
    p.add_argument("--method", default="gradient")
    checked(p, "--step", type=float, default=0.1, check=fraction, help="share of all heads removed per step")
    p.add_argument("--rescore", action="store_true", help="re-score the remaining heads after each step")
    _score_options(p)
    p.add_argument("--seed", type=int, default=0)
    checked(p, "--seeds", type=int, default=None, check=positive_int,
            help="run the curve with N seeds (--seed, +1, ...) and write mean, sd and band per point "
                 "(default: 3 for a method whose scores come from the seed, such as random; else 1)")
    p.set_defaults(func=cmd_curve)

    p = sub.add_parser("prune", help="physically remove the masked heads and save the smaller model")
    p.add_argument("model")
    _mask_options(p, "a headprune.mask/1 file", required=True)
    checked(p, "--out", required=True, check=output_folder, help="folder to save the pruned model to")
    p.add_argument("--allow-pickle", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=DTYPE_CHOICES,
                   help="the precision the pruned model is saved in (half precision needs --device cuda)")
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("bench", help="latency, throughput, memory: dense vs masked vs physically pruned")
    _common(p, task=False)
    _mask_options(p, "a headprune.mask/1 file (default: remove half the heads of every layer, seeded)")
    checked(p, "--batch-sizes", default="1,8,32", check=int_list)
    checked(p, "--seq-len", type=int, default=128, check=positive_int)
    checked(p, "--repeats", type=int, default=None, check=positive_int)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("app", help="start the dashboard")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--host", default=LOOPBACK, metavar="ADDR",
                   help="address to listen on (default 127.0.0.1: this machine only); another address, such as "
                        "0.0.0.0, exposes the dashboard to the network on purpose")
    p.add_argument("--data-dir", action="append", default=[], metavar="DIR",
                   help="on an exposed server, a folder whose files and model folders users may open by path "
                        "(repeatable; without it only uploads, hub ids and the default work)")
    p.set_defaults(func=cmd_app)

    from .smp.cli import add_smp_commands
    add_smp_commands(sub)
    from .dynamics_cli import add_dynamics_command
    add_dynamics_command(sub)
    return parser


# -- helpers ---------------------------------------------------------------------------------------

def _mask_options(p: argparse.ArgumentParser, help: str, required: bool = False) -> None:
    """``--mask FILE`` or ``--mask-link URL`` (a dashboard link from its Share page), not both."""
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("--mask", help=help)
    group.add_argument("--mask-link", metavar="URL",
                       help="read the mask from a shared dashboard link (its 'mask' query parameter) instead")


def _score_options(p: argparse.ArgumentParser) -> None:
    """Where heads are scored, apart from where they are measured (--split)."""
    p.add_argument("--score-split", default=None,
                   help="split the heads are scored on (default: train; the metric is measured on "
                        "--split, so the order is not chosen on the data it is measured on)")
    checked(p, "--score-limit", type=int, default=DEFAULT_SCORE_LIMIT, check=positive_int,
            help=f"examples of --score-split used for scoring (default {DEFAULT_SCORE_LIMIT})")
    p.add_argument("--no-normalize", action="store_true", help="rank by raw scores, not per-layer l2-normalised ones")


def _score_split(args, task) -> str:
    """The split to score on: --score-split, else the library's default (:func:`tasks.default_score_split`:
    train when the task has training examples of its own). Where that default falls back to the split the
    metric is measured on, the user has to say so with --score-split."""
    from .tasks import SCORE_SPLIT, default_score_split

    def missing(split: str) -> UsageError:
        return UsageError(f"Task {task.name!r} has no {split!r} split to score the heads on; pass --score-split "
                          f"with one of: {', '.join(task.splits)}.")
    if args.score_split is not None:
        if args.score_split not in task.splits:
            raise missing(args.score_split)
        return args.score_split
    if default_score_split(task) == SCORE_SPLIT:
        return SCORE_SPLIT
    if SCORE_SPLIT not in task.splits:
        raise missing(SCORE_SPLIT)
    raise UsageError(f"Task {task.name!r} is one set of examples (every split name is the whole file), so the "
                     "heads would be scored on the examples they are measured on. Pass --score-split "
                     f"{task.default_split} to accept that, or use a task with a train split.")


def _read_mask(args, layout):
    """The mask named by ``--mask`` or ``--mask-link``, checked against ``layout``; None if neither."""
    if getattr(args, "mask_link", None):
        from .share_link import mask_from_link
        return mask_from_link(args.mask_link, layout)
    if args.mask:
        from .results import load_mask
        return load_mask(args.mask, layout)
    return None


def _load(args, attn: str = "eager"):
    from .models import load_model
    dmap = getattr(args, "device_map", None)
    return load_model(args.model, device=args.device, allow_pickle=args.allow_pickle, attn_implementation=attn,
                      device_map=parse_device_map(dmap) if dmap is not None else None, dtype=args.dtype)


def _progress():
    """Progress bars on the process that prints (rank 0 under torchrun), none on the other ranks."""
    return tqdm_progress() if distributed.is_writer() else None


def _task_and_split(args):
    from .tasks import get_task
    task = get_task(args.task)
    split = args.split or getattr(task, "default_split", "validation")
    return task, split


def _write(args, data: dict) -> None:
    """Write ``--out``: rank 0 only, once every rank got this far (a failed rank leaves no file)."""
    if getattr(args, "out", None):
        distributed.agree(f"writing {args.out}")
        if distributed.is_writer():
            print(f"wrote {write_output('--out', args.out, data)}")


def _require_heads(loaded, what: str) -> None:
    """Refuse to ``what`` (score, ablate ...) the heads of a model that has none left."""
    if loaded.layout.total_heads == 0:
        raise HeadpruneError(f"Model {loaded.model_id!r} has no attention heads left (all were removed when it "
                             f"was pruned), so there are none to {what}. Use the model it was pruned from.")


def _fmt(metric_name: str, value: float) -> str:
    from .metrics import get_metric
    return get_metric(metric_name).format_plain(value)


# -- commands --------------------------------------------------------------------------------------

def cmd_prepare(args) -> None:
    from . import zoo
    if args.list:
        for name in zoo.names():
            entry = zoo.get(name)
            state = "prepared" if entry.is_prepared() else f"not prepared ({entry.cost})"
            print(f"{name:<14} {entry.title}\n{'':<14} task {entry.task}; {state}")
        return
    report = zoo.get(args.model).run_prepare(force=args.force, progress=_progress())
    print(report.summary() if hasattr(report, "summary") else report)


def cmd_info(args) -> None:
    from .pruning import attention_parameter_count, parameter_count
    from .results import provenance
    loaded = _load(args)
    total, attn = parameter_count(loaded.model), attention_parameter_count(loaded.model)
    print(f"model      {loaded.model_id}  ({loaded.source}, {loaded.config.model_type}, {loaded.task_type})")
    print(f"weights    sha256 {loaded.weights_sha256[:16]}…")
    print(f"heads      {loaded.layout.describe()}  ({loaded.layout.total_heads} in all)")
    print(f"parameters {total:,} ({attn:,} in attention, {attn / total:.1%})")
    if loaded.pruned_heads:
        print(f"pruned     {sum(len(v) for k in loaded.pruned_heads.values() for v in k.values())} heads removed earlier")
    _write(args, {"format": "headprune.info/1", "model": loaded.model_id, "model_type": loaded.config.model_type,
                  "task_type": loaded.task_type, "layout": loaded.layout.to_json(), "parameters": total,
                  "attention_parameters": attn, "pruned_heads": loaded.pruned_heads,
                  "provenance": provenance(loaded)})


def cmd_evaluate(args) -> None:
    from .results import provenance
    task, split = _task_and_split(args)
    task.check_beams(args.beams)
    loaded = _load(args)
    mask = _read_mask(args, loaded.layout)
    data = task.encode(loaded, split, args.limit)
    res = task.evaluate(loaded, data, mask, batch_size=args.batch_size, beams=args.beams, progress=_progress())
    kept = f", {mask.n_kept}/{mask.n_total} heads kept" if mask else ""
    print(f"{task.name} [{split}, {res.n_examples} examples{kept}]: {res.metric_name} "
          f"{_fmt(res.metric_name, res.metric)}, loss {res.loss:.4f}  ({res.seconds:.1f} s)")
    _write(args, res.to_json(provenance(loaded, task=task.name, split=split, n_examples=res.n_examples,
                                        method="evaluate", settings={"mask": args.mask or args.mask_link,
                                                                      "beams": args.beams}), mask))


def _score_config(args, split: str | None = None, limit: int | None = None):
    """Scoring settings: on ``split`` and ``limit`` when given, else on --split and --limit."""
    from .scoring import ScoreConfig
    split = split or _task_and_split(args)[1]
    return ScoreConfig(split=split, limit=limit if limit is not None else args.limit,
                       normalize=not args.no_normalize, seed=getattr(args, "seed", 0), batch_size=args.batch_size)


def cmd_score(args) -> None:
    from .scoring import get_scorer
    scorer = get_scorer(args.method)
    from .tasks import SCORE_SPLIT, default_score_split
    task, _ = _task_and_split(args)
    split, limit = args.split, args.limit
    if split is None and default_score_split(task) == SCORE_SPLIT:     # score on train, measure elsewhere
        split, limit = SCORE_SPLIT, limit or DEFAULT_SCORE_LIMIT
    loaded = _load(args)
    _require_heads(loaded, "score")
    result = scorer.score(loaded, task, _score_config(args, split, limit), progress=_progress())
    print(f"{scorer.name} scores of {loaded.layout.total_heads} heads in {result.seconds:.1f} s "
          f"({'per-layer l2-normalised' if result.normalize else 'raw'}); least important first:")
    for kind, layer, head in result.ranking_scores.ranked(seed=args.seed)[:10]:
        print(f"  {kind:12s} layer {layer:2d} head {head:2d}  {result.ranking_scores.get((kind, layer, head)):.4g}")
    _write(args, result.to_json())


def cmd_mask(args) -> None:
    from .presets import keep_top_per_layer, remove_least_important
    from .results import load_scores, mask_to_json
    scores = load_scores(args.scores)
    if (args.remove is None) == (args.keep_per_layer is None):
        raise HeadpruneError("Give exactly one of --remove FRACTION or --keep-per-layer N.")
    if args.remove is not None:
        mask = remove_least_important(scores.ranking_scores, args.remove, per_layer=args.per_layer)
    else:
        mask = keep_top_per_layer(scores.ranking_scores, args.keep_per_layer)
    write_output("--out", args.out, mask_to_json(mask, scores.provenance.get("model"),
                                      {"from_scores": str(args.scores), "method": scores.method,
                                       "score_split": scores.provenance.get("split"),
                                       "score_n": scores.provenance.get("n_examples"),
                                       "remove": args.remove, "per_layer": args.per_layer,
                                       "keep_per_layer": args.keep_per_layer}))
    print(f"mask keeps {mask.n_kept}/{mask.n_total} heads; wrote {args.out}")


def cmd_ablate(args) -> None:
    from .experiments import ablation_table
    task, split = _task_and_split(args)
    loaded = _load(args)
    _require_heads(loaded, "ablate")
    data = task.encode(loaded, split, args.limit)
    table = ablation_table(loaded, task, data, batch_size=args.batch_size, progress=_progress())
    print(f"base {table.metric_name} {_fmt(table.metric_name, table.base_metric)} on {table.n_examples} examples; "
          "largest changes when one head is removed:")
    from .metrics import get_metric
    metric = get_metric(table.metric_name)
    for r in sorted(table.rows, key=lambda r: metric.sort_key(r.delta_metric))[:10]:
        test = (f"  95 % [{r.delta_low:+.4f}, {r.delta_high:+.4f}], p {r.p_value:.3g}, Holm p {r.p_holm:.3g}"
                if r.p_value is not None else "")
        print(f"  {r.kind:12s} layer {r.layer:2d} head {r.head:2d}  {r.delta_metric:+.4f}  (loss {r.delta_loss:+.4f})"
              f"{test}")
    if table.test:
        print(f"{table.n_significant(adjusted=False)} of {len(table.rows)} heads differ from the unpruned model at "
              f"p < 0.05 ({table.test}); {table.n_significant(adjusted=True)} after Holm–Bonferroni correction "
              f"for {len(table.rows)} tests.")
    _write(args, table.to_json())


def cmd_one_per_layer(args) -> None:
    from .experiments import one_head_per_layer
    from .results import load_scores
    task, split = _task_and_split(args)
    loaded = _load(args)
    _require_heads(loaded, "reduce to one per layer")
    data = task.encode(loaded, split, args.limit)
    scores = load_scores(args.scores, loaded.layout) if args.scores else None
    if args.method:
        from .scoring import get_scorer
        scorer = get_scorer(args.method)
        config = _score_config(args, _score_split(args, task), args.score_limit)
        scores = scorer.score(loaded, task, config, progress=_progress())
        print(f"heads scored by {scorer.name} on {config.split} ({scores.provenance.get('n_examples')} examples), "
              f"measured on {split} ({data.n_examples} examples)")
    res = one_head_per_layer(loaded, task, data, scores=scores, batch_size=args.batch_size, progress=_progress())
    print(f"base {res.metric_name} {_fmt(res.metric_name, res.base_metric)}; each layer alone reduced to one head:")
    for r in res.rows:
        print(f"  {r.kind:12s} layer {r.layer:2d} keep head {r.kept_head:2d}  {_fmt(res.metric_name, r.metric)}"
              f"  ({r.delta_metric:+.4f})")
    print(f"all layers at once: {_fmt(res.metric_name, res.all_layers_metric)}")
    _write(args, res.to_json())


def cmd_curve(args) -> None:
    from .experiments import seeded_curves
    from .scoring import get_scorer
    scorer = get_scorer(args.method)
    seeds = args.seeds or (3 if scorer.info.seeded else 1)
    if seeds > 1 and not scorer.info.seeded:
        raise UsageError(f"--seeds {seeds} repeats the curve under other seeds, but method {scorer.name!r} does not "
                         "draw its scores from the seed: every seed gives the same curve. Leave --seeds out.")
    task, split = _task_and_split(args)
    loaded = _load(args)
    _require_heads(loaded, "prune step by step")
    config = _score_config(args, _score_split(args, task), args.score_limit)
    data = task.encode(loaded, split, args.limit)
    curve = seeded_curves(loaded, task, data, scorer, config, seeds, step=args.step, rescore=args.rescore,
                          batch_size=args.batch_size, progress=_progress())
    settings = curve.provenance.get("settings", {})
    score_n = settings.get("score_n")
    scored_on = (f"heads scored on {config.split} ({score_n} examples)" if score_n is not None
                 else "heads ranked from the seed alone (no data read)")
    print(f"{scorer.name} pruning curve ({'re-scored' if args.rescore else 'scored once'}): {scored_on}, "
          f"{curve.metric_name} measured on {split} "
          f"({curve.n_examples} examples)" + (f", mean ± sd over {seeds} seeds" if seeds > 1 else "") + ":")
    for p in curve.points:
        spread = f" ± {_fmt(curve.metric_name, p.sd)}" if p.sd is not None else ""
        interval = (f"  95 % [{_fmt(curve.metric_name, p.low)}, {_fmt(curve.metric_name, p.high)}]"
                    if p.low is not None else "")
        print(f"  {p.fraction_removed:6.1%} removed ({p.heads_removed:3d} heads)  "
              f"{_fmt(curve.metric_name, p.metric)}{spread}{interval}  loss {p.loss:.4f}")
    _write(args, curve.to_json())


def cmd_prune(args) -> None:
    from .models import save_pruned
    from .pruning import parameter_count, prune_heads
    loaded = _load(args)
    mask = _read_mask(args, loaded.layout)
    pruned = prune_heads(loaded.model, mask)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise HeadpruneError(f"Output folder {str(out)!r} exists and is not empty; choose a new folder.")
    save_pruned(pruned, loaded.tokenizer, out)
    before, after = parameter_count(loaded.model), parameter_count(pruned)
    print(f"removed {mask.n_total - mask.n_kept}/{mask.n_total} heads; parameters {before:,} -> {after:,} "
          f"({1 - after / before:.1%} fewer); saved to {out}")


def cmd_bench(args) -> None:
    from .bench import benchmark, format_bench
    sizes = tuple(int(s) for s in args.batch_sizes.split(","))     # checked by cli_args.int_list
    loaded = _load(args, attn="sdpa")
    mask = _read_mask(args, loaded.layout)          # None: the benchmark's own half mask (seed 0)
    kwargs = {"repeats": args.repeats} if args.repeats else {}
    result = benchmark(loaded, mask, batch_sizes=sizes, seq_len=args.seq_len, device=args.device,
                       progress=_progress(), **kwargs)
    print(format_bench(result))
    _write(args, result.to_json())


def app_command(args, entry: Path) -> tuple[list[str], dict[str, str]]:
    """The ``streamlit run`` command line for ``headprune app`` and the variables added to its environment.

    The server listens on ``args.host`` (127.0.0.1 unless given). On any other address the
    dashboard opens local paths only inside the ``--data-dir`` folders (``HEADPRUNE_DATA_DIRS``,
    set even when empty); on loopback it is left as the operator's environment has it.
    """
    import os
    cmd = [sys.executable, "-m", "streamlit", "run", str(entry), "--server.port", str(args.port),
           "--server.address", args.host]
    if is_loopback(args.host):
        if args.data_dir:
            print("headprune: note: --data-dir only matters with --host (the dashboard is on this machine only)",
                  file=sys.stderr)
        return cmd, {}
    dirs = []
    for d in args.data_dir:
        folder = Path(d).expanduser().resolve()
        if not folder.is_dir():
            raise HeadpruneError(f"--data-dir {d!r} is not a folder; give an existing folder of data files or models.")
        dirs.append(str(folder))
    return cmd, {DATA_DIRS_ENV: os.pathsep.join(dirs)}


def cmd_app(args) -> None:
    import os

    from .children import run_child
    root = Path(__file__).resolve().parent.parent
    entry = root / "dashboard.py"
    if not entry.is_file():
        raise HeadpruneError(f"The dashboard is not installed next to the library (looked for {entry}).")
    cmd, env = app_command(args, entry)
    if env:
        print(f"headprune: the dashboard listens on {args.host} and opens local files only inside: "
              f"{', '.join(args.data_dir) or '(no folder; uploads only)'}", file=sys.stderr)
    # the server runs as a supervised child: stopping `headprune app` (Ctrl-C, SIGTERM) stops it too
    raise SystemExit(run_child(cmd, cwd=root, env={**os.environ, **env} if env else None))


def _run(args) -> bool:
    """Run the command alone, or on every rank under torchrun (docs/DISTRIBUTED.md); True if it joined a group."""
    mapped = getattr(args, "device_map", None) is not None
    joined = distributed.current() is None and distributed.join_for_command(
        args.command, hasattr(args, "distributed"), getattr(args, "distributed", False),
        getattr(args, "device", None), mapped) is not None
    world = distributed.current()
    if world is None:
        args.func(args)
        return False
    if not mapped:
        args.device = world.devices[world.rank]          # cuda:LOCAL_RANK, or cpu
    distributed.run_everywhere(lambda: args.func(args), f"headprune {args.command}")
    return joined


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()      # our own bars only
    hf_logging.set_verbosity_error()
    joined = False
    try:
        with signals_raise():           # SIGTERM unwinds like an exception: temp files and children go
            run_checks(args)
            joined = _run(args)
    except HeadpruneError as exc:
        print(f"headprune: error: {distributed.rank_prefix()}{exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("headprune: interrupted", file=sys.stderr)
        return 130
    finally:
        if joined:                      # a group this call joined (not one its caller had joined)
            distributed.shutdown()
    return 0
