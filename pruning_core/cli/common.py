"""What the ``headprune`` commands share: the common options, reading a mask, loading the model, progress
bars, writing ``--out`` (rank 0 only under torchrun), and the checks every command makes."""
from __future__ import annotations

import argparse

from pruning_core.core.runtime import distributed
from pruning_core.cli.args import (
    DTYPE_CHOICES,
    checked,
    device_map,
    output_file,
    parse_device_map,
    positive_int,
    write_output,
)
from pruning_core.core.errors import HeadpruneError, UsageError
from pruning_core.core.progress import tqdm_progress


def common_options(p: argparse.ArgumentParser, task: bool = True, out: bool = True, distributed: bool = True,
                   from_link: bool = False) -> None:
    """The model argument and the options every command shares; ``--distributed`` only where the command's
    data passes are split over torchrun's processes (``task`` and ``distributed``). With ``from_link`` the model,
    ``--task`` and ``--limit`` may come from ``--mask-link`` instead (:func:`take_link`)."""
    also = " (default: the --mask-link's)" if from_link else ""
    p.add_argument("model", nargs="?" if from_link else None, default=None,
                   help=f"'default', a local model folder, or a Hugging Face hub id{also}")
    if task:
        p.add_argument("--task", required=not from_link,
                       help="movie-sentiment, movie-text (language models), a GLUE/WMT name (sst2, wmt14-fr-en), "
                            f"or file:PATH (.csv, .tsv, .jsonl; .txt for language models){also}")
        p.add_argument("--split", default=None, help="data split (default: validation; file tasks: test)")
        checked(p, "--limit", type=int, default=None, check=positive_int,
                help="use at most N examples (the first N of the split)"
                     + (" (default: the --mask-link's n, else all)" if from_link else ""))
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
    if task and distributed:
        p.add_argument("--distributed", action="store_true",
                       help="data-parallel over the processes torchrun started (detected by itself under "
                            "torchrun): `torchrun --nproc-per-node N -m pruning_core ...`; see docs/DISTRIBUTED.md")

def mask_options(p: argparse.ArgumentParser, help: str, required: bool = False, link_help: str | None = None) -> None:
    """``--mask FILE`` or ``--mask-link URL`` (a dashboard link from its Share page), not both."""
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("--mask", help=help)
    group.add_argument("--mask-link", metavar="URL",
                       help=link_help or "read the mask from a shared dashboard link (its 'mask' query parameter) "
                                         "instead")

def take_link(args):
    """The model, ``--task`` and ``--limit`` a command was not given, from ``--mask-link`` (the dashboard's
    choices, so the command evaluates what the page did); an option given on the command line wins, and one
    line says so. Returns the link's :class:`SharedLink` (None without one).

    Raises:
        UsageError: no model or no task, neither on the command line nor in the link.
        FormatError: an unreadable link.
    """
    link = None
    if getattr(args, "mask_link", None):
        from pruning_core.core.io.share_link import QP_LIMIT, QP_MODEL, QP_TASK, parse_link
        link = parse_link(args.mask_link)
        for dest, given_as, name, value in (("model", "model", QP_MODEL, link.model),
                                            ("task", "--task", QP_TASK, link.task),
                                            ("limit", "--limit", QP_LIMIT, link.eval_limit)):
            given = getattr(args, dest)
            if value is None:
                continue
            if given is None:
                setattr(args, dest, value)
            elif str(given) != str(value):
                print(f"{given_as} {given} given: overrides the link's {name}={value}")
    missing = [what for what, value in (("a model", args.model), ("--task", args.task)) if value is None]
    if missing:
        where = "the link names none" if link is not None else "or pass --mask-link with a dashboard link"
        raise UsageError(f"Give {' and '.join(missing)} ({where}), e.g. `headprune {args.command} default --task "
                         "movie-sentiment`, or `headprune evaluate --mask-link LINK` with the Share page's link.")
    return link


def read_mask(args, layout):
    """The mask named by ``--mask`` or ``--mask-link``, checked against ``layout``; None if neither."""
    if getattr(args, "mask_link", None):
        from pruning_core.core.io.share_link import mask_from_link
        return mask_from_link(args.mask_link, layout)
    if args.mask:
        from pruning_core.evaluation.results import load_mask
        return load_mask(args.mask, layout)
    return None

def load_from_args(args, attn: str = "eager"):
    from pruning_core.modeling.sources.loading import load_model
    dmap = getattr(args, "device_map", None)
    return load_model(args.model, device=args.device, allow_pickle=args.allow_pickle, attn_implementation=attn,
                      device_map=parse_device_map(dmap) if dmap is not None else None, dtype=args.dtype)

def progress_bars():
    """Progress bars on the process that prints (rank 0 under torchrun), none on the other ranks."""
    return tqdm_progress() if distributed.is_writer() else None

def task_and_split(args):
    from pruning_core.tasks import get_task
    task = get_task(args.task)
    split = args.split or getattr(task, "default_split", "validation")
    return task, split

def write_result(args, data: dict) -> None:
    """Write ``--out``: rank 0 only, once every rank got this far (a failed rank leaves no file)."""
    if getattr(args, "out", None):
        distributed.agree(f"writing {args.out}")
        if distributed.is_writer():
            print(f"wrote {write_output('--out', args.out, data)}")

def require_heads(loaded, what: str) -> None:
    """Refuse to ``what`` (score, ablate ...) the heads of a model that has none left."""
    if loaded.layout.total_heads == 0:
        raise HeadpruneError(f"Model {loaded.model_id!r} has no attention heads left (all were removed when it "
                             f"was pruned), so there are none to {what}. Use the model it was pruned from.")

def fmt(metric_name: str, value: float) -> str:
    from pruning_core.evaluation.metrics import get_metric
    return get_metric(metric_name).format_plain(value)
