"""Sharing an analysis: the link to the dashboard, and the pruned model as a zip.

- :func:`share_link` builds a URL whose query parameters carry model, task, scorer, evaluation
  size and mask; :func:`decode_link` reads one back, checking the mask against a model's layout.
  Both are ``pruning_core.core.io.share_link`` (the mask's URL text form lives there, the same one the
  dashboard keeps in its address bar and ``headprune evaluate --mask-link`` reads).
- :func:`pruned_model_zip` saves the physically pruned copy (``prune_heads``) with its tokenizer
  and zips the folder; ``pruning_core.modeling.sources.loading.load_model(folder)`` loads it back.

The analysis bundle itself is :mod:`app.share.analysis`. Pure: no Streamlit, no session state.
"""
from __future__ import annotations

import io
import json
import re
import shlex
import tempfile
import zipfile
from pathlib import Path

from app.core.pages import URL_PATHS
from pruning_core.core.errors import FormatError
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.modeling.sources.loading import save_pruned
from pruning_core.modeling.pruning import loads_in, parameter_count, prune_heads
from pruning_core.evaluation.results import mask_to_json, provenance
from pruning_core.core.io.share_link import build_link, parse_link

LINK_PAGE = "head_map"


def link_base(current_url: str | None, page: str = LINK_PAGE) -> str:
    """The address of ``page`` of this app, from the address of the page the user is on.

    ``current_url`` is ``st.context.url`` (None outside a browser: then ``http://localhost:8501``).
    """
    url = (current_url or "http://localhost:8501").split("?", 1)[0].split("#", 1)[0].rstrip("/")
    head, _, last = url.rpartition("/")
    if last in URL_PATHS and "://" in head:
        url = head
    return f"{url}/{page}"


share_link = build_link      # ``share_link(base_url, params)``: the link with ``params`` as its query string


def decode_link(url_or_query: str, layout: HeadLayout | None = None) -> dict:
    """The choices a link carries: ``{"model", "task", "scorer", "eval_size", "mask"}`` (None if absent).

    With ``layout``, the mask is decoded into a ``HeadMask`` and checked against it (FormatError
    if the link was made for a model of another shape); without, it stays the text form.
    """
    link = parse_link(url_or_query)
    return {"model": link.model, "task": link.task, "scorer": link.scorer, "eval_size": link.eval_limit,
            "mask": link.head_mask(layout) if layout is not None else link.mask}


# -- the pruned model as a zip ---------------------------------------------------------------------

def pruned_folder_name(model_id: str, mask: HeadMask) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(str(model_id).rstrip("/")).name or "model").strip("-.") or "model"
    return f"{stem}-pruned-{mask.n_kept}of{mask.n_total}-heads"


_README = """This folder is a head-pruned model saved by headprune.

Heads kept: {kept} of {total}; parameters: {params:,} (the dense model has {dense_params:,}).
The removed heads are listed in config.json under "headprune_pruned_heads" and in headprune_mask.json
(1 = kept, 0 = removed).

It loads in {loads_in}.
With headprune (which rebuilds the smaller attention layers before loading the weights, whatever the shape):

    from pruning_core.modeling.sources.loading import load_model
    loaded = load_model("{name}")          # loaded.model is a transformers model

or evaluate it from the command line, in the folder that holds {name}:

    {command}
"""


def link_command(link: str) -> str:
    """The command that measures what ``link`` shows (its model, task, evaluation size and mask), quoted for a
    POSIX shell: ``headprune evaluate --mask-link '<link>'``."""
    return f"headprune evaluate --mask-link {shlex.quote(link)}"


def evaluate_command(folder: str, task_name: str) -> str:
    """The ``headprune evaluate`` command line that measures the model in ``folder`` on ``task_name``."""
    return f"headprune evaluate {shlex.quote(folder)} --task {shlex.quote(task_name)}"


def pruned_model_zip(loaded, mask: HeadMask, task_name: str, *, name: str | None = None) -> bytes:
    """The physically pruned copy of ``loaded`` (model + tokenizer + mask), zipped into one folder.

    ``loaded.model`` is not modified (``prune_heads`` works on a deep copy). The zip holds one folder
    ``name`` (default: ``<model>-pruned-<kept>of<total>-heads``) that ``load_model`` can open; its
    README gives the command that evaluates it on ``task_name``.
    """
    mask.check_fits(loaded.layout)
    name = name or pruned_folder_name(loaded.model_id, mask)
    pruned = prune_heads(loaded.model, mask)
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="headprune-zip-") as tmp:
        folder = save_pruned(pruned, loaded.tokenizer, Path(tmp) / name, shortlist=loaded.shortlist)
        (folder / "headprune_mask.json").write_text(
            json.dumps(mask_to_json(mask, str(loaded.model_id), provenance(loaded, method="prune")), indent=1) + "\n",
            encoding="utf-8")
        (folder / "README.txt").write_text(_README.format(
            kept=mask.n_kept, total=mask.n_total, params=parameter_count(pruned),
            dense_params=parameter_count(loaded.model), name=name,
            loads_in=loads_in(pruned, name, saved_now=True), command=evaluate_command(name, task_name)),
            encoding="utf-8")
        del pruned
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    zf.write(path, f"{name}/{path.relative_to(folder).as_posix()}")
    return buffer.getvalue()


def unzip_model(data: bytes, into: str | Path) -> Path:
    """Unpack a zip made by :func:`pruned_model_zip` into ``into``; returns the model folder.

    Refuses members that would land outside ``into`` (absolute paths, ``..``).
    """
    into = Path(into).resolve()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = zf.namelist()
        for n in names:
            target = (into / n).resolve()
            if into not in target.parents and target != into:
                raise FormatError(f"The zip has a member {n!r} outside its folder; refusing to unpack it.")
        zf.extractall(into)
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) != 1:
        raise FormatError(f"The zip should hold one model folder, it holds {sorted(tops)}.")
    return into / tops.pop()
