"""``headprune`` long-context commands: kv-policy (a KV-cache head policy from a score map, or random),
kv-policy-export / kv-policy-import (the policy in DuoAttention's pattern form) and causal-test (the top heads by
a score removed against as many random heads). ``evaluate --context N
--kv-policy FILE`` measures a long-context task under a policy (:mod:`.analysis`)."""
from __future__ import annotations

from pruning_core.cli.args import checked, fraction, output_file, output_folder, positive_int, write_output
from pruning_core.cli.common import common_options, load_from_args, progress_bars, task_and_split, write_result
from pruning_core.core.errors import UsageError


def _nonnegative(option: str, value: int) -> None:
    if value < 0:
        raise UsageError(f"{option} must be 0 or more tokens, got {value}.")


def score_map(path: str, role: str | None, layout=None):
    """``(HeadScores, method, provenance)`` of a headprune.scores/1 file, or of one role of a headprune.roles/1
    file (``headprune roles --out``: retrieval, induction ...) with ``role``."""
    from pruning_core.evaluation.results import load_scores, read_json
    data = read_json(path)
    if str(data.get("format", "")).startswith("headprune.roles/"):
        from pruning_core.analysis.roles.report import load_roles
        report = load_roles(path, layout)
        if role is None or role not in report.scores:
            raise UsageError(f"{path!r} is a roles file: name the role whose scores to use with --role, one of "
                             f"{', '.join(report.scores)}.")
        return report.head_scores(role), f"role:{role}", dict(report.provenance)
    if role is not None:
        raise UsageError(f"--role reads a roles file (`headprune roles --out`); {path!r} is a scores file.")
    scores = load_scores(path, layout)
    return scores.ranking_scores, scores.method, dict(scores.provenance)


def add_commands(sub) -> None:
    """Add kv-policy and causal-test to the sub-commands ``sub``."""
    p = sub.add_parser("kv-policy", help="write a KV-cache head policy (full or streaming per key/value head) from "
                                         "a scores file, or at random")
    p.add_argument("scores", nargs="?", default=None,
                   help="a headprune.scores/1 file (retrieval, induction, I_h ...): the key/value heads whose query "
                        "heads score lowest stream")
    checked(p, "--stream", type=float, default=None, check=fraction,
            help="share of key/value heads that stream (keep sink + window tokens), e.g. 0.5")
    p.add_argument("--all", action="store_true",
                   help="every key/value head streams (StreamingLLM; needs --model, no scores): the sink ablation, "
                        "e.g. --all --sink 4 --window 1000")
    checked(p, "--sink", type=int, default=128, check=_nonnegative, help="first tokens a streaming head keeps")
    checked(p, "--window", type=int, default=256, check=positive_int, help="last tokens a streaming head keeps")
    p.add_argument("--role", default=None, help="with a roles file (`headprune roles --out`): the role, e.g. retrieval")
    p.add_argument("--random", type=int, default=None, metavar="SEED",
                   help="choose the streaming heads at random with this seed instead of from scores (needs --model)")
    p.add_argument("--model", default=None, help="the model (default: the one named in the scores file)")
    checked(p, "--context", type=int, default=2048, check=positive_int,
            help="context length at which the KV memory is reported (default 2048)")
    checked(p, "--out", required=True, check=output_file)
    p.add_argument("--device", default=None)
    p.add_argument("--allow-pickle", action="store_true")
    p.set_defaults(func=cmd_kv_policy, dtype="auto", device_map=None)

    p = sub.add_parser("kv-policy-export", help="write a KV policy as a DuoAttention attention pattern (the folder "
                                                "kvpress's DuoAttentionPress and DuoAttention load)")
    p.add_argument("policy", help="a headprune.kv_policy/1 file (`headprune kv-policy`)")
    p.add_argument("--format", default="duo", choices=["duo"], help="duo: full_attention_heads.tsv + config.json")
    checked(p, "--out", required=True, check=output_folder, help="a new (or empty) folder for the pattern")
    p.set_defaults(func=cmd_kv_policy_export)

    p = sub.add_parser("kv-policy-import", help="read a DuoAttention attention pattern as a headprune.kv_policy/1 file")
    p.add_argument("pattern", help="a DuoAttention pattern folder (full_attention_heads.tsv, config.json) or the .tsv")
    p.add_argument("--format", default="duo", choices=["duo"])
    checked(p, "--stream", type=float, default=None, check=fraction,
            help="stream this share of heads, those of lowest value (kvpress's rule); default: the heads below "
                 "--threshold (DuoAttention's)")
    p.add_argument("--threshold", type=float, default=0.5, help="gate value below which a head streams (default 0.5)")
    checked(p, "--sink", type=int, default=None, check=_nonnegative, help="sink tokens (default: the config's sink_size)")
    checked(p, "--window", type=int, default=None, check=positive_int,
            help="window tokens (default: the config's recent_size)")
    p.add_argument("--model", default=None, help="check that the pattern fits this model's key/value heads")
    checked(p, "--out", required=True, check=output_file)
    p.add_argument("--device", default=None)
    p.add_argument("--allow-pickle", action="store_true")
    p.set_defaults(func=cmd_kv_policy_import, dtype="auto", device_map=None)

    p = sub.add_parser("causal-test", help="remove the top share of heads by a score against as many random heads "
                                           "(several seeds); accuracy on held-out examples, paired tests")
    common_options(p)
    p.add_argument("--scores", required=True,
                   help="a headprune.scores/1 file scored on another split (train), or a roles file with --role")
    p.add_argument("--role", default=None, help="with a roles file (`headprune roles --out`): the role, e.g. retrieval")
    checked(p, "--top", type=float, default=0.05, check=fraction, help="share of all heads removed (default 0.05)")
    checked(p, "--seeds", type=int, default=3, check=positive_int, help="random draws (seeds 0..N-1; default 3)")
    checked(p, "--context", type=int, default=None, check=positive_int,
            help="context length in tokens of a long-context task (default: the task's own, 1024)")
    p.set_defaults(func=cmd_causal_test)


def cmd_kv_policy(args) -> None:
    from pruning_core.evaluation.results import provenance
    from pruning_core.modeling.kv import kv_policy
    if args.all:
        if args.scores is not None or args.random is not None or args.stream not in (None, 1.0):
            raise UsageError("--all streams every key/value head: give it with --model, without a scores file, "
                             "--random or --stream.")
        args.stream = 1.0
    elif (args.scores is None) == (args.random is None):
        raise UsageError("Give a scores file, --random SEED (with --model) or --all (with --model), exactly one.")
    elif args.stream is None:
        raise UsageError("Say which share of the key/value heads streams with --stream, e.g. --stream 0.5.")
    scores = score_map(args.scores, args.role) if args.scores else None
    args.model = args.model or (scores[2].get("model") if scores else None)
    if not args.model:
        raise UsageError("Name the model with --model (the scores file does not say which it is).")
    loaded = load_from_args(args)
    if scores is not None:
        values, method, origin = scores
        values.check_fits(loaded.layout)
        policy = kv_policy.from_scores(values, kv_policy.groups_of(loaded), args.stream, sink=args.sink, window=args.window,
                                 source={"scores": str(args.scores), "score_method": method,
                                         "score_split": origin.get("split"), "score_task": origin.get("task")})
    elif args.all:
        policy = kv_policy.KVPolicy.all_streaming(kv_policy.kv_heads_of(loaded), args.sink, args.window)
    else:
        policy = kv_policy.random_policy(kv_policy.kv_heads_of(loaded), args.stream, args.random, sink=args.sink,
                                   window=args.window)
    memory = kv_policy.memory_report(policy, loaded, args.context)
    data = policy.to_json(provenance(loaded, method="kv-policy", settings={"memory": memory}))
    write_output("--out", args.out, data)
    print(f"{policy.n_streaming}/{policy.n_heads} key/value heads stream (sink {policy.sink}, window "
          f"{policy.window}); KV cache at {args.context} tokens: {_mib(memory['kv_bytes'])} vs "
          f"{_mib(memory['full_kv_bytes'])} full ({memory['ratio']:.2f}x smaller); wrote {args.out}")


def cmd_kv_policy_export(args) -> None:
    from pruning_core.modeling.kv import kv_duo, kv_policy
    from pruning_core.evaluation.results import read_json
    policy = kv_policy.load_policy(args.policy)
    folder = kv_duo.write(policy, args.out, provenance=read_json(args.policy).get("provenance"))
    print(f"{policy.n_streaming}/{policy.n_heads} key/value heads stream (gate 0.0; full heads 1.0), sink_size "
          f"{policy.sink}, recent_size {policy.window}; wrote {folder}/{kv_duo.PATTERN} and {kv_duo.CONFIG} "
          f"(kvpress: DuoAttentionPress(head_compression_ratio={policy.n_streaming / policy.n_heads:.4g}))")


def cmd_kv_policy_import(args) -> None:
    from pruning_core.modeling.kv import kv_duo
    policy = kv_duo.read(args.pattern, stream=args.stream, threshold=args.threshold, sink=args.sink,
                         window=args.window)
    provenance = {"method": "kv-policy-import", "pattern_format": args.format, "pattern": str(args.pattern)}
    if args.model:
        loaded = load_from_args(args)
        policy.check_fits(loaded)
        provenance["model"] = loaded.model_id
    write_output("--out", args.out, policy.to_json(provenance))
    print(f"{policy.n_streaming}/{policy.n_heads} key/value heads stream (sink {policy.sink}, window "
          f"{policy.window}); wrote {args.out}")


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:.2f} MiB"


def cmd_causal_test(args) -> None:
    from dataclasses import replace

    from pruning_core.analysis.causal import CausalConfig, causal_test
    from pruning_core.evaluation.results import provenance
    task, split = task_and_split(args)
    loaded = load_from_args(args)
    values, method, origin = score_map(args.scores, args.role, loaded.layout)
    score_split, score_task = origin.get("split"), origin.get("task")
    if score_split == split and score_task in (None, task.name):
        raise UsageError(f"The scores were computed on split {split!r}, the one the heads are measured on: score "
                         "them on another split (`headprune score ... --score-split train`) or measure with --split.")
    config = CausalConfig(fraction=args.top, seeds=tuple(range(args.seeds)), split=split, limit=args.limit,
                          context=args.context, batch_size=args.batch_size)
    result = causal_test(loaded, task, values, config, progress=progress_bars())
    metric = task.metric
    runs = result.runs
    print(f"{task.name} [{split}, {result.n_examples} examples], {result.n_heads_removed}/"
          f"{result.total_heads} heads removed ({method} scores from {score_split or 'their own probe'}):")
    for name, run in runs.items():
        interval = metric.format_interval(*run["interval"]) if run["interval"] else "no interval"
        print(f"  {name:10s} {metric.format(run['metric'])}  (95 % interval {interval})")
    for c in result.comparisons:
        print(f"  {c['other']} vs {c['base']}: {metric.format_delta(c['delta'], 0.0)}, {c['p_text']}")
    made = provenance(loaded, task=task.name, split=split, n_examples=result.n_examples, method="causal-test",
                     settings={"top": args.top, "seeds": args.seeds, "context": args.context})
    scores = {"file": str(args.scores), "method": method, **origin}
    write_result(args, replace(result, scores=scores, provenance=made).to_json())
