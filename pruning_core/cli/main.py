"""The ``headprune`` command-line tool: one sub-command per library entry point.

Every command prints a human summary on the terminal and, with ``--out FILE``, writes the
result as a headprune JSON file. User errors (HeadpruneError) print their message and exit 2.

One module per group of commands: :mod:`.analysis` (evaluate, score, mask, ablate, one-per-layer, curve),
:mod:`.model` (info, prune, bench, export), :mod:`.compress` (compress), :mod:`.roles` (roles; --protect and
--roles-file), :mod:`.long_context` (kv-policy, causal-test), :mod:`.setup` (prepare, app), :mod:`.smp` (smp)
and :mod:`.dynamics` (dynamics), with what they share in :mod:`.common`, :mod:`.args` and
:mod:`.scoring_options`. This module builds the parser and runs a command (alone, or on every rank under
torchrun).
"""
from __future__ import annotations

import argparse
import sys

from pruning_core.cli import (
    analysis as cli_analysis,
    compress as cli_compress,
    long_context as cli_long_context,
    model as cli_model,
    roles as cli_roles,
    setup as cli_setup,
)
from pruning_core.core.runtime import distributed
from pruning_core.core.runtime.children import signals_raise
from pruning_core.cli.args import run_checks
from pruning_core.core.errors import HeadpruneError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headprune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    cli_setup.add_prepare(sub)
    cli_model.add_info(sub)
    cli_analysis.add_commands(sub)             # evaluate, score, mask, ablate, one-per-layer, curve, kinds
    cli_roles.add_roles(sub)
    cli_long_context.add_commands(sub)         # kv-policy, kv-policy-export, kv-policy-import, causal-test
    cli_model.add_prune_and_bench(sub)
    cli_compress.add_compress(sub)
    cli_model.add_export(sub)
    cli_setup.add_app(sub)

    from pruning_core.cli.smp import add_smp_commands
    add_smp_commands(sub)
    from pruning_core.cli.dynamics import add_dynamics_command
    add_dynamics_command(sub)
    return parser


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
