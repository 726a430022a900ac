"""``headprune roles``, and the role options other commands share: ``--protect ROLES`` (heads never removed)
and ``--roles-file FILE`` (a ``headprune roles --out`` file, else the roles are computed on the fly), and the
line each mask summary adds ("removes 3 of 8 induction heads")."""
from __future__ import annotations

import argparse

from pruning_core.cli.args import checked
from pruning_core.cli.common import common_options, load_from_args, progress_bars, write_result
from pruning_core.core.errors import UsageError

MAX_LISTED = 12                 # heads listed per role in the table


def add_roles(sub) -> None:
    p = sub.add_parser("roles", help="what each head does: previous-token, induction, retrieval, ... heads")
    common_options(p, task=False)
    p.add_argument("--task", default=None,
                   help="the texts the heads are probed on and rare-word frequencies are counted in (default: the "
                        "embedded movie-sentiment snippets)")
    p.add_argument("--roles", default=None, help="comma-separated roles (default: all); see the table for names")
    p.add_argument("--seed", type=int, default=0, help="draws the repeated random tokens and the needles")
    p.set_defaults(func=cmd_roles)


def role_options(p: argparse.ArgumentParser) -> None:
    """``--protect`` and ``--roles-file`` for commands that remove heads."""
    p.add_argument("--protect", default=None, metavar="ROLES",
                   help="never remove heads with these roles, e.g. induction,retrieval (`headprune roles` lists them)")
    checked(p, "--roles-file", default=None, check=existing_roles_file,
            help="role scores from `headprune roles MODEL --out FILE` (default with --protect: computed now)")


def existing_roles_file(option: str, value: str) -> None:
    from pathlib import Path
    if not Path(value).expanduser().is_file():
        raise UsageError(f"{option} {value!r} does not exist; write it with `headprune roles MODEL --out FILE`.")


def _head(head) -> str:
    kind, layer, h = head
    return f"{kind} L{layer}.{h}"


def cmd_roles(args) -> None:
    from pruning_core.analysis.roles import compute_roles, get_role, parse_roles
    names = parse_roles(args.roles)
    loaded = load_from_args(args)
    report = compute_roles(loaded, task=args.task, roles=names, seed=args.seed, progress=progress_bars())
    seconds = report.provenance["settings"]["seconds"]
    print(f"head roles of {loaded.model_id} ({loaded.layout.total_heads} heads), probed on "
          f"{report.provenance['task']} in {seconds:.1f} s:")
    print(f"  {'role':16s} {'threshold':>9s} {'heads':>5s}  detected (kind Llayer.head)")
    for name in names:
        if not report.scores[name]:
            print(f"  {name:16s} {'':>9s} {'-':>5s}  not computed for this model ({get_role(name).probe} probe; "
                  f"applies to {', '.join(get_role(name).kinds)} of {'decoder-only LMs' if name == 'retrieval' else 'any model'})")
            continue
        heads = report.heads(name)
        listed = ", ".join(_head(h) for h in heads[:MAX_LISTED]) + (f", ... (+{len(heads) - MAX_LISTED})"
                                                                    if len(heads) > MAX_LISTED else "")
        print(f"  {name:16s} {report.thresholds[name]:>9.2f} {len(heads):>5d}  {listed or 'none'}")
    write_result(args, report.to_json())


def roles_report(args, loaded=None, spec: str | None = None, layout=None, task: str | None = None):
    """The role report ``--roles-file`` names, or (with ``--protect``) one computed now for ``loaded`` or ``spec``
    on ``task``'s texts (None: the embedded ones); None when neither option was given."""
    from pruning_core.analysis.roles import compute_roles, load_roles, parse_roles
    protect = parse_roles(args.protect) if args.protect else []
    if args.roles_file:
        report = load_roles(args.roles_file, layout if layout is not None else getattr(loaded, "layout", None))
        missing = [r for r in protect if r not in report.scores]
        if missing:
            raise UsageError(f"Roles file {args.roles_file!r} has no scores for {', '.join(missing)}; it has "
                             f"{', '.join(report.scores)}. Write it again with `headprune roles MODEL --roles "
                             f"{','.join(protect)} --out FILE`.")
        return report
    if not protect:
        return None
    if loaded is None:
        if not spec:
            raise UsageError("--protect needs the model the heads belong to: give --model MODEL or --roles-file FILE.")
        from pruning_core.modeling.sources.loading import load_model
        loaded = load_model(spec, device="cpu")
    from pruning_core.analysis.roles import get_role
    titles = ", ".join(get_role(r).short_title for r in protect)
    print(f"computing the {titles} roles of {loaded.model_id} (save them once with `headprune roles "
          "MODEL --out FILE` and pass --roles-file FILE to skip this)")
    return compute_roles(loaded, task=task, roles=protect, progress=progress_bars())


def protected_of(args, report) -> frozenset:
    from pruning_core.analysis.roles import parse_roles, protected_heads
    return protected_heads(report, parse_roles(args.protect)) if report is not None and args.protect else frozenset()


def summary_of(report, mask, protect: str | None = None) -> str:
    """``"; removes 3 of 8 induction heads"`` for a mask summary line (every role with heads, and the ``protect``
    roles even without), or "" without a role report."""
    if report is None:
        return ""
    from pruning_core.analysis.roles import parse_roles, removal_summary
    roles = [r for r in report.roles if report.heads(r)]
    roles += [r for r in parse_roles(protect) if r not in roles] if protect else []
    return f"; {removal_summary(report, mask, roles)}"


def role_note(args, report, protected: frozenset) -> None:
    if args.protect and report is not None:
        print(f"protected ({args.protect}): {len(protected)} heads never removed")

