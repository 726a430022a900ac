"""``headprune`` analysis commands: evaluate, score, mask, ablate, one-per-layer, curve, kinds.

Heads are scored on the split :func:`pruning_core.tasks.default_score_split` names (train when the task
has training examples of its own) and measured on ``--split``.
"""
from __future__ import annotations

import argparse

from pruning_core.cli.args import checked, fraction, output_file, positive_int, write_output
from pruning_core.cli.common import (
    common_options,
    fmt,
    load_from_args,
    mask_options,
    progress_bars,
    read_mask,
    require_heads,
    take_link,
    task_and_split,
    write_result,
)
from pruning_core.cli.roles import protected_of, role_note, role_options, roles_report, summary_of
from pruning_core.core.errors import HeadpruneError, UsageError
from pruning_core.scoring import scorer_names
from pruning_core.cli.scoring_options import add_score_options, scores_json, with_score_options

DEFAULT_SCORE_LIMIT = 512         # examples of the score split (the default split: tasks.default_score_split)


def add_commands(sub) -> None:
    """Add evaluate, score, mask, ablate, one-per-layer and curve to the sub-commands ``sub``."""
    p = sub.add_parser("evaluate", help="metric and loss, optionally under a head mask; `evaluate --mask-link LINK` "
                                        "alone measures what the dashboard's link shows")
    common_options(p, from_link=True)
    mask_options(p, "a headprune.mask/1 file", link_help="a shared dashboard link (its Share page's): its mask, and "
                                                         "the model, --task and --limit (n) not given here")
    checked(p, "--beams", type=int, default=1, check=positive_int,
            help="beam size for translation (1 = greedy); other tasks refuse values other than 1")
    checked(p, "--context", type=int, default=None, check=positive_int,
            help="tokens per example: a long-context task's context length (niah-single, niah-multikey ...: default "
                 "1024), a language model's window (default 128)")
    p.add_argument("--kv-policy", default=None, metavar="FILE",
                   help="a headprune.kv_policy/1 file (`headprune kv-policy`): its streaming key/value heads keep only "
                        "sink + window tokens, in the attention and the cache; the KV memory is reported beside")
    p.add_argument("--no-shortlist", action="store_true",
                   help="greedy translation over the whole vocabulary, not the model's vocabulary shortlist "
                        "(Bergamot models ship one and decode with it by default, as deployed; the dashboard too)")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("score", help="importance score of every head")
    common_options(p)
    p.add_argument("--method", default="gradient", help=f"one of: {', '.join(scorer_names())}")
    p.add_argument("--no-normalize", action="store_true", help="rank by raw scores, not per-layer l2-normalised ones")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--score-split", dest="split",
                   help="the same as --split: the split the heads are scored on (default: train, "
                        f"first {DEFAULT_SCORE_LIMIT} examples, when the task has one; else the task's own split)")
    checked(p, "--score-limit", dest="limit", type=int, default=None, check=positive_int, help="the same as --limit")
    checked(p, "--context", type=int, default=None, check=positive_int,
            help="tokens per example (a long-context task's context length; default 128)")
    add_score_options(p)                   # --baseline (atp), --verify K (exact-ablation check)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("mask", help="make a mask file from a scores file")
    p.add_argument("scores", help="a headprune.scores/1 file")
    p.add_argument("--remove", type=float, default=None, help="share of heads to remove, e.g. 0.5")
    p.add_argument("--per-layer", action="store_true", help="remove that share in every layer, not globally")
    p.add_argument("--keep-per-layer", type=int, default=None, help="keep only the N best heads of every layer")
    p.add_argument("--uniform", action="store_true",
                   help="with --remove: remove that share of whole key/value groups from every layer, the least "
                        "important, so every layer keeps the same heads (a grouped-query model then prunes to a "
                        "stock config that plain transformers loads); reads the model's groups")
    p.add_argument("--model", default=None,
                   help="the model the scores are of, for --uniform (default: the model named in the scores file)")
    checked(p, "--out", required=True, check=output_file)
    role_options(p)
    p.set_defaults(func=cmd_mask)

    p = sub.add_parser("ablate", help="single-head ablation table")
    common_options(p)
    p.set_defaults(func=cmd_ablate)

    p = sub.add_parser("one-per-layer", help="reduce each layer to its best head, one layer at a time")
    common_options(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--scores", help="choose each layer's best head from this scores file (default: search)")
    how.add_argument("--method", help="choose each layer's best head by scoring the heads with this method "
                                      "(on --score-split) (default: search)")
    score_options(p)
    p.set_defaults(func=cmd_one_per_layer)

    p = sub.add_parser("curve", help="iterative pruning curve: metric as heads are removed")
    common_options(p)
    p.add_argument("--method", default="gradient")
    checked(p, "--step", type=float, default=0.1, check=fraction, help="share of all heads removed per step")
    p.add_argument("--rescore", action="store_true", help="re-score the remaining heads after each step")
    score_options(p)
    p.add_argument("--seed", type=int, default=0)
    checked(p, "--seeds", type=int, default=None, check=positive_int,
            help="run the curve with N seeds (--seed, +1, ...) and write mean, sd and band per point "
                 "(default: 3 for a method whose scores come from the seed, such as random; else 1)")
    role_options(p)
    p.add_argument("--repair", action="store_true",
                   help="also tune each point's kept heads by least squares on the --score-split examples (Kwon et al. "
                        "2022, with FLAP's bias compensation) and add the repaired metric per point")
    p.set_defaults(func=cmd_curve)

    p = sub.add_parser("kinds", help="which attention kind the task needs most: a share of one kind's heads removed "
                                     "at a time (Michel et al. §5)")
    common_options(p)
    p.add_argument("--method", default="gradient", help="the scorer that orders heads (default: gradient, I_h)")
    p.add_argument("--fractions", default="0.1,0.25,0.5", help="shares of each kind's heads to remove")
    p.add_argument("--seeds", type=int, default=3, help="random orders per share, beside the scorer's (default 3)")
    p.add_argument("--kinds", default=None, help="measure only these kinds, separated by commas (e.g. decoder_self)")
    p.add_argument("--borrow", action="append", default=[], metavar="JSON",
                   help="another model's saved `headprune kinds` result: the kinds this model lacks are read from it "
                        "(repeatable; each is shown with the model, task and metric it comes from)")
    score_options(p)
    p.set_defaults(func=cmd_kinds)


def score_options(p: argparse.ArgumentParser) -> None:
    """Where heads are scored, apart from where they are measured (--split)."""
    p.add_argument("--score-split", default=None,
                   help="split the heads are scored on (default: train; the metric is measured on "
                        "--split, so the order is not chosen on the data it is measured on)")
    checked(p, "--score-limit", type=int, default=DEFAULT_SCORE_LIMIT, check=positive_int,
            help=f"examples of --score-split used for scoring (default {DEFAULT_SCORE_LIMIT})")
    p.add_argument("--no-normalize", action="store_true", help="rank by raw scores, not per-layer l2-normalised ones")


def score_split(args, task) -> str:
    """The split to score on: --score-split, else the library's default (:func:`tasks.default_score_split`:
    train when the task has training examples of its own). Where that default falls back to the split the
    metric is measured on, the user has to say so with --score-split."""
    from pruning_core.tasks import SCORE_SPLIT, default_score_split

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


def score_config(args, split: str | None = None, limit: int | None = None):
    """Scoring settings: on ``split`` and ``limit`` when given, else on --split and --limit."""
    from pruning_core.scoring import ScoreConfig
    split = split or task_and_split(args)[1]
    config = ScoreConfig(split=split, limit=limit if limit is not None else args.limit,
                         normalize=not args.no_normalize, seed=getattr(args, "seed", 0), batch_size=args.batch_size,
                         **({"max_length": args.context} if getattr(args, "context", None) else {}))
    return with_score_options(config, args)


def _named(metric, value: float, interval) -> str:
    """'accuracy 85.2 % (95 % interval …)', or '41.76 BLEU (…)' when the unit already names the metric."""
    text = metric.format_with_interval(value, interval)
    return text if text.split(" (")[0].endswith(metric.label) else f"{metric.label} {text}"


def _as_shown(metric, res) -> str:
    """The figure as the dashboard's Head map writes it ('accuracy 87 % (95 % interval 80–92 %, 128 examples)')
    and the loss to four decimals (:meth:`Metric.format_shown`, the page's rounding)."""
    value, span = metric.format_shown(res.metric, res.interval)
    n = f"{res.n_examples} example{'s' if res.n_examples != 1 else ''}"
    text = f"{value} ({'95 % interval ' + span + ', ' + n if span else n + ', no interval'})"
    unit = metric.fmt.rsplit("}", 1)[-1].strip()
    if unit == metric.label:                      # 'BLEU 32 (… 28–35, …)': the unit written once, as on the page
        text = text.replace(f" {unit}", "")
    return f"{metric.label} {text}, loss {res.loss:.4f}"


def cmd_evaluate(args) -> None:
    from pruning_core.evaluation.metrics import get_metric
    from pruning_core.evaluation.results import provenance
    from pruning_core.evaluation.significance import beside_intervals
    link = take_link(args)
    task, split = task_and_split(args)
    task.check_beams(args.beams)
    loaded = load_from_args(args)
    mask = link.head_mask(loaded.layout) if link is not None else read_mask(args, loaded.layout)
    from pruning_core.modeling.kv import kv_policy
    policy = kv_policy.load_policy(args.kv_policy) if args.kv_policy else None
    if policy is not None:
        policy.check_fits(loaded)
    data = task.encode(loaded, split, args.limit, **({"max_length": args.context} if args.context else {}))
    with kv_policy.applied(loaded, policy):
        res = task.evaluate(loaded, data, mask, batch_size=args.batch_size, beams=args.beams,
                            progress=progress_bars(), shortlist=not args.no_shortlist)
    kept = f", {mask.n_kept}/{mask.n_total} heads kept" if mask else ""
    metric = get_metric(res.metric_name)
    print(f"{task.name} [{split}, {res.n_examples} examples{kept}]: {_named(metric, res.metric, res.interval)}, "
          f"loss {res.loss:.4f}  ({res.seconds:.1f} s)")
    for name, interval in beside_intervals(res, task.references(data)).items():     # e.g. chrF beside BLEU
        print(f"  {_named(get_metric(name), res.extra[name], interval)}")
    if link is not None:
        print(f"  as the dashboard shows it: {_as_shown(metric, res)}")
    if res.extra.get("ruler_score") not in (None, res.metric):        # tasks of several answers: partial credit
        print(f"  RULER's score (string_match_all: the share of answers found) {100 * res.extra['ruler_score']:.1f} %")
    settings = {"mask": args.mask or args.mask_link, "beams": args.beams, "context": data.max_length}
    if policy is not None:
        memory = kv_policy.memory_report(policy, loaded, data.max_length)
        settings["kv_policy"] = {"file": args.kv_policy, **policy.to_json(), "memory": memory}
        print(f"  KV policy {args.kv_policy}: {policy.n_streaming}/{policy.n_heads} key/value heads stream (sink "
              f"{policy.sink}, window {policy.window}); KV cache at {data.max_length} tokens "
              f"{memory['kv_bytes'] / 2 ** 20:.2f} MiB vs {memory['full_kv_bytes'] / 2 ** 20:.2f} MiB full "
              f"({memory['ratio']:.2f}x smaller)")
    if "decoding" in res.extra:
        settings["decoding"] = res.extra["decoding"]
        if res.extra["decoding"].get("shortlist"):
            print(f"  decoded over the model's vocabulary shortlist ({res.extra['decoding']['shortlist']['file']}, as "
                  "deployed); --no-shortlist decodes over the whole vocabulary")
    write_result(args, res.to_json(provenance(loaded, task=task.name, split=split, n_examples=res.n_examples,
                                              method="evaluate", settings=settings), mask))


def cmd_score(args) -> None:
    from pruning_core.scoring import get_scorer
    scorer = get_scorer(args.method)
    from pruning_core.tasks import SCORE_SPLIT, default_score_split
    task, _ = task_and_split(args)
    split, limit = args.split, args.limit
    if split is None and default_score_split(task) == SCORE_SPLIT:     # score on train, measure elsewhere
        split, limit = SCORE_SPLIT, limit or DEFAULT_SCORE_LIMIT
    loaded = load_from_args(args)
    require_heads(loaded, "score")
    result = scorer.score(loaded, task, score_config(args, split, limit), progress=progress_bars())
    print(f"{scorer.name} scores of {loaded.layout.total_heads} heads in {result.seconds:.1f} s "
          f"({'per-layer l2-normalised' if result.normalize else 'raw'}); least important first:")
    for kind, layer, head in result.ranking_scores.ranked(seed=args.seed)[:10]:
        print(f"  {kind:12s} layer {layer:2d} head {head:2d}  {result.ranking_scores.get((kind, layer, head)):.4g}")
    write_result(args, scores_json(args, loaded, task, result, progress=progress_bars()))


def cmd_mask(args) -> None:
    from pruning_core.modeling.presets import keep_top_per_layer, remove_least_important
    from pruning_core.evaluation.results import load_scores, mask_to_json
    scores = load_scores(args.scores)
    if (args.remove is None) == (args.keep_per_layer is None):
        raise HeadpruneError("Give exactly one of --remove FRACTION or --keep-per-layer N.")
    if args.uniform and (args.remove is None or args.per_layer):
        raise HeadpruneError("--uniform goes with --remove FRACTION (it is per layer already), not with "
                             "--keep-per-layer or --per-layer.")
    report = roles_report(args, spec=args.model or scores.provenance.get("model"), layout=scores.scores.layout,
                          task=scores.provenance.get("task"))
    protected = protected_of(args, report)
    if args.uniform:
        mask = _uniform_mask(args, scores, protected)
    elif args.remove is not None:
        mask = remove_least_important(scores.ranking_scores, args.remove, per_layer=args.per_layer, protected=protected)
    else:
        mask = keep_top_per_layer(scores.ranking_scores, args.keep_per_layer, protected=protected)
    write_output("--out", args.out, mask_to_json(mask, scores.provenance.get("model"),
                                      {"from_scores": str(args.scores), "method": scores.method,
                                       "score_split": scores.provenance.get("split"),
                                       "score_n": scores.provenance.get("n_examples"),
                                       "remove": args.remove, "per_layer": args.per_layer,
                                       "keep_per_layer": args.keep_per_layer, "uniform": args.uniform,
                                       "protect": args.protect, "protected_heads": len(protected)}))
    role_note(args, report, protected)
    print(f"mask keeps {mask.n_kept}/{mask.n_total} heads{summary_of(report, mask, args.protect)}; wrote {args.out}")


def _uniform_mask(args, scores, protected: frozenset = frozenset()):
    """``presets.uniform_by_group`` with the key/value groups of ``--model`` (or the scores' own model)."""
    from pruning_core.modeling.architectures import kv_groups_of
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.modeling.presets import uniform_by_group
    spec = args.model or scores.provenance.get("model")
    if not spec:
        raise HeadpruneError(f"The scores file {args.scores!r} names no model; give --model MODEL (the model it "
                             "scored) so that --uniform can read its key/value groups.")
    loaded = load_model(spec, device="cpu")
    if loaded.layout != scores.scores.layout:
        raise HeadpruneError(f"Model {spec!r} has heads {loaded.layout.describe()}, the scores "
                             f"{scores.scores.layout.describe()}; give --model the model that was scored.")
    return uniform_by_group(scores.ranking_scores, kv_groups_of(loaded.sites), args.remove, protected=protected)


def cmd_ablate(args) -> None:
    from pruning_core.evaluation.experiments import ablation_table
    task, split = task_and_split(args)
    loaded = load_from_args(args)
    require_heads(loaded, "ablate")
    data = task.encode(loaded, split, args.limit)
    table = ablation_table(loaded, task, data, batch_size=args.batch_size, progress=progress_bars())
    print(f"base {table.metric_name} {fmt(table.metric_name, table.base_metric)} on {table.n_examples} examples; "
          "largest changes when one head is removed:")
    from pruning_core.evaluation.metrics import get_metric
    from pruning_core.evaluation.significance import p_text
    metric = get_metric(table.metric_name)
    for r in sorted(table.rows, key=lambda r: metric.sort_key(r.delta_metric))[:10]:
        test = (f"  95 % [{r.delta_low:+.4f}, {r.delta_high:+.4f}], {p_text(r.p_value, table.test, metric)}, "
                f"Holm-adjusted {p_text(r.p_holm, table.test, metric)}"
                if r.p_value is not None else "")
        print(f"  {r.kind:12s} layer {r.layer:2d} head {r.head:2d}  {r.delta_metric:+.4f}  (loss {r.delta_loss:+.4f})"
              f"{test}")
    if table.test:
        print(f"{table.n_significant(adjusted=False)} of {len(table.rows)} heads differ from the unpruned model at "
              f"p < 0.05 ({table.test}); {table.n_significant(adjusted=True)} after Holm–Bonferroni correction "
              f"for {len(table.rows)} tests.")
    write_result(args, table.to_json())


def cmd_one_per_layer(args) -> None:
    from pruning_core.evaluation.experiments import one_head_per_layer
    from pruning_core.evaluation.results import load_scores
    task, split = task_and_split(args)
    loaded = load_from_args(args)
    require_heads(loaded, "reduce to one per layer")
    data = task.encode(loaded, split, args.limit)
    scores = load_scores(args.scores, loaded.layout) if args.scores else None
    if args.method:
        from pruning_core.scoring import get_scorer
        scorer = get_scorer(args.method)
        config = score_config(args, score_split(args, task), args.score_limit)
        scores = scorer.score(loaded, task, config, progress=progress_bars())
        print(f"heads scored by {scorer.name} on {config.split} ({scores.provenance.get('n_examples')} examples), "
              f"measured on {split} ({data.n_examples} examples)")
    res = one_head_per_layer(loaded, task, data, scores=scores, batch_size=args.batch_size, progress=progress_bars())
    print(f"base {res.metric_name} {fmt(res.metric_name, res.base_metric)}; each layer alone reduced to one head:")
    for r in res.rows:
        print(f"  {r.kind:12s} layer {r.layer:2d} keep head {r.kept_head:2d}  {fmt(res.metric_name, r.metric)}"
              f"  ({r.delta_metric:+.4f})")
    print(f"all layers at once: {fmt(res.metric_name, res.all_layers_metric)}")
    write_result(args, res.to_json())


def cmd_curve(args) -> None:
    from pruning_core.evaluation.experiments import seeded_curves
    from pruning_core.core.heads import HeadMask
    from pruning_core.scoring import get_scorer
    scorer = get_scorer(args.method)
    seeds = args.seeds or (1 if args.repair else 3 if scorer.info.seeded else 1)
    if seeds > 1 and args.repair:
        raise UsageError(f"--repair tunes the masks of one curve; --seeds {seeds} averages several. Give --seeds 1.")
    if seeds > 1 and not scorer.info.seeded:
        raise UsageError(f"--seeds {seeds} repeats the curve under other seeds, but method {scorer.name!r} does not "
                         "draw its scores from the seed: every seed gives the same curve. Leave --seeds out.")
    task, split = task_and_split(args)
    loaded = load_from_args(args)
    require_heads(loaded, "prune step by step")
    config = score_config(args, score_split(args, task), args.score_limit)
    data = task.encode(loaded, split, args.limit)
    report = roles_report(args, loaded, task=args.task)
    protected = protected_of(args, report)
    role_note(args, report, protected)
    curve = seeded_curves(loaded, task, data, scorer, config, seeds, step=args.step, rescore=args.rescore,
                          batch_size=args.batch_size, progress=progress_bars(), protected=protected)
    if args.repair:
        from pruning_core.compress.curve import repaired_curve
        calibration = task.encode(loaded, config.split, args.score_limit)
        curve = repaired_curve(loaded, task, data, curve, calibration, bias_compensation=True,
                               batch_size=args.batch_size, progress=progress_bars())
    settings = curve.provenance.get("settings", {})
    score_n = settings.get("score_n")
    scored_on = (f"heads scored on {config.split} ({score_n} examples)" if score_n is not None
                 else "heads ranked from the seed alone (no data read)")
    print(f"{scorer.name} pruning curve ({'re-scored' if args.rescore else 'scored once'}): {scored_on}, "
          f"{curve.metric_name} measured on {split} "
          f"({curve.n_examples} examples)" + (f", mean ± sd over {seeds} seeds" if seeds > 1 else "") + ":")
    for p in curve.points:
        spread = f" ± {fmt(curve.metric_name, p.sd)}" if p.sd is not None else ""
        interval = (f"  95 % [{fmt(curve.metric_name, p.low)}, {fmt(curve.metric_name, p.high)}]"
                    if p.low is not None else "")
        repaired = (f"  repaired {fmt(curve.metric_name, p.repaired_metric)}" if p.repaired_metric is not None else "")
        print(f"  {p.fraction_removed:6.1%} removed ({p.heads_removed:3d} heads)  "
              f"{fmt(curve.metric_name, p.metric)}{spread}{interval}  loss {p.loss:.4f}{repaired}"
              f"{summary_of(report, HeadMask.from_lists(p.mask), args.protect).replace(';', ' ', 1)}")
    write_result(args, curve.to_json())


def _fractions(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"--fractions takes shares separated by commas, e.g. 0.1,0.25,0.5; got {text!r}.") from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise UsageError(f"--fractions must be shares in (0, 1], e.g. 0.1,0.25,0.5; got {text!r}.")
    return values


def cmd_kinds(args) -> None:
    from pruning_core.core.heads import KIND_LABELS
    from pruning_core.evaluation.kinds import borrow, kind_sensitivity, missing_note, source_label
    from pruning_core.scoring import get_scorer
    fractions = _fractions(args.fractions)
    if args.seeds < 0:
        raise UsageError(f"--seeds must be 0 or more, got {args.seeds}.")
    borrowed = [_kinds_file(path) for path in args.borrow]
    task, split = task_and_split(args)
    loaded = load_from_args(args)
    require_heads(loaded, "remove heads of one kind")
    config = score_config(args, score_split(args, task), args.score_limit)
    scores = get_scorer(args.method).score(loaded, task, config, progress=progress_bars())
    data = task.encode(loaded, split, args.limit)
    kinds = None if args.kinds is None else [k.strip() for k in args.kinds.split(",") if k.strip()]
    result = kind_sensitivity(loaded, task, data, scores.ranking_scores, fractions=fractions, seeds=args.seeds,
                              batch_size=args.batch_size, kinds=kinds, progress=progress_bars())
    name = result.metric_name
    print(f"{name} on {split} ({result.n_examples} examples), all heads: {fmt(name, result.base_metric)}; "
          f"heads of one kind removed by {args.method} (least important first) and at random "
          f"({args.seeds} seeds):")
    _print_kinds(result, result.heads)
    if note := missing_note(result.missing):
        print(f"  {note}")
    for run, taken in borrow(result, borrowed)[1:]:
        print(f"borrowed from {source_label(run)} (all heads: {fmt(run.metric_name, run.base_metric)}):")
        _print_kinds(run, taken)
    if len(result.heads) > 1:
        print(f"most sensitive: {KIND_LABELS[result.most_sensitive('importance')]} (by {args.method})"
              + (f", {KIND_LABELS[result.most_sensitive('random')]} (random)" if args.seeds else ""))
    write_result(args, result.to_json())


def _print_kinds(result, kinds) -> None:
    """One line per kind and share removed: the metric by the scorer's order, its interval, the random orders'."""
    from pruning_core.core.heads import KIND_LABELS
    name = result.metric_name
    for kind in kinds:
        for share in sorted({p.fraction for p in result.points if p.kind == kind}):
            rows = [p for p in result.points if p.kind == kind and p.fraction == share]
            best = next(p for p in rows if p.method == "importance")
            rnd = [fmt(name, p.metric) for p in rows if p.method == "random"]
            interval = f" [{fmt(name, best.low)}, {fmt(name, best.high)}]" if best.low is not None else ""
            print(f"  {KIND_LABELS[kind]:34s} {best.heads_removed:3d} of {result.heads[kind]:3d} removed: "
                  f"{fmt(name, best.metric)}{interval}" + (f"; random {', '.join(rnd)}" if rnd else ""))


def _kinds_file(path: str):
    """A saved ``headprune kinds`` result (UsageError naming the file and the fix when it is not one)."""
    import json
    from pathlib import Path

    from pruning_core.evaluation.kinds import KindSensitivity
    try:
        return KindSensitivity.from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError, HeadpruneError) as exc:
        raise UsageError(f"--borrow {path}: not a saved `headprune kinds` result ({exc}). Write one with "
                         "`headprune kinds MODEL --task TASK --out FILE.json`.") from None
