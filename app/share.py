"""Sharing an analysis: the JSON bundle, the link, and the pruned model as a zip.

- :class:`Analysis` is the whole analysis of one session: model, task, scorer, mask, and whatever
  results exist (scores, curves, evaluations, ablation tables, benchmark), with provenance. It is
  written as one ``headprune.analysis/1`` JSON file that embeds the project's own formats
  (``headprune.mask/1``, ``scores/1``, ``curve/1``, ``eval/1``, ``ablation/1``,
  ``one_per_layer/1``, ``bench/1``) unchanged, and read back by :func:`read_shared_file`, which
  also accepts a plain mask file and the HTML report (it carries the bundle inside).
- :func:`share_link` builds a URL whose query parameters carry model, task, scorer, evaluation
  size and mask; :func:`decode_link` reads one back, checking the mask against a model's layout.
  The mask's text form is ``app.state.mask_to_param`` (hex bits per layer, kinds by code), the
  same one the dashboard keeps in its address bar, so a link and the address bar never disagree.
- :func:`pruned_model_zip` saves the physically pruned copy (``prune_heads``) with its tokenizer
  and zips the folder; ``pruning_core.models.load_model(folder)`` loads it back.

Everything here takes data (a ``LoadedModel``, results), never session state.
"""
from __future__ import annotations

import io
import json
import re
import tempfile
import urllib.parse
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pruning_core.bench import BenchResult
from pruning_core.errors import FormatError
from pruning_core.experiments import AblationResult, CurveResult, OnePerLayerResult
from pruning_core.heads import HeadLayout, HeadMask
from pruning_core.models import save_pruned
from pruning_core.pruning import parameter_count, prune_heads
from pruning_core.results import (EvalResult, ScoreResult, check_format, mask_from_json, mask_to_json,
                                  provenance)

from .state import (QP_LIMIT, QP_MASK, QP_MODEL, QP_SCORER, QP_TASK, mask_from_param, mask_to_param)

ANALYSIS_FORMAT = "headprune.analysis/1"
BUNDLE_SCRIPT_ID = "headprune-analysis"     # <script type="application/json" id=...> inside the HTML report


@dataclass(frozen=True)
class Analysis:
    """One session's analysis. Only ``model_id``, ``layout`` and ``mask`` are required.

    ``task`` / ``scorer`` are None when unknown (a bare mask file). Masks are 1 = keep, 0 = removed.
    """

    model_id: str
    layout: HeadLayout
    mask: HeadMask
    task: str | None = None
    scorer: str | None = None
    weights_sha256: str | None = None
    eval_limit: int | None = None                     # examples in the live panel's evaluation subset
    scores: Mapping[str, ScoreResult] = field(default_factory=dict)        # by scorer name
    curves: Mapping[str, CurveResult] = field(default_factory=dict)        # by scorer name
    evaluation: EvalResult | None = None              # the current mask on the evaluation subset
    dense_evaluation: EvalResult | None = None        # all heads kept, same data
    ablation: AblationResult | None = None
    one_per_layer: OnePerLayerResult | None = None
    bench: BenchResult | None = None
    provenance: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.mask.check_fits(self.layout)

    # -- writing ------------------------------------------------------------------------------
    def link_params(self) -> dict[str, str]:
        """The query parameters of a link to this analysis (see :func:`share_link`)."""
        params = {QP_MODEL: self.model_id}
        if self.task:
            params[QP_TASK] = self.task
        if self.scorer:
            params[QP_SCORER] = self.scorer
        if self.eval_limit:
            params[QP_LIMIT] = str(self.eval_limit)
        if not self.mask.is_full():
            params[QP_MASK] = mask_to_param(self.mask)
        return params

    def to_json(self) -> dict:
        """The ``headprune.analysis/1`` bundle; each result keeps its own format and provenance."""
        evals = {}
        if self.evaluation is not None:
            evals["masked"] = self.evaluation.to_json(mask=self.mask)
        if self.dense_evaluation is not None:
            evals["dense"] = self.dense_evaluation.to_json(mask=HeadMask.full(self.layout))
        return {
            "format": ANALYSIS_FORMAT,
            "model": {"id": self.model_id, "weights_sha256": self.weights_sha256, "layout": self.layout.to_json()},
            "task": self.task,
            "scorer": self.scorer,
            "eval_limit": self.eval_limit,
            "mask": mask_to_json(self.mask, self.model_id),
            "heads_kept": self.mask.n_kept,
            "heads_total": self.mask.n_total,
            "link": self.link_params(),
            "scores": {name: r.to_json() for name, r in self.scores.items()},
            "curves": {name: r.to_json() for name, r in self.curves.items()},
            "eval": evals,
            "ablation": self.ablation.to_json() if self.ablation else None,
            "one_per_layer": self.one_per_layer.to_json() if self.one_per_layer else None,
            "bench": self.bench.to_json() if self.bench else None,
            "provenance": dict(self.provenance),
        }

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")

    # -- reading ------------------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: Mapping, where: str = "the analysis file") -> "Analysis":
        """Read a ``headprune.analysis/1`` bundle, checking every embedded result against its layout."""
        check_format(data, ANALYSIS_FORMAT, where)
        try:
            model = data["model"]
            layout = HeadLayout.from_json(model["layout"])
            mask = mask_from_json(data["mask"], layout, where=f"the mask in {where}")
            scores = {str(k): ScoreResult.from_json(v, layout, where=f"the {k} scores in {where}")
                      for k, v in (data.get("scores") or {}).items()}
            curves = {str(k): CurveResult.from_json(v) for k, v in (data.get("curves") or {}).items()}
            evals = data.get("eval") or {}
            opt = data.get
            return cls(
                model_id=str(model["id"]), layout=layout, mask=mask, task=opt("task"), scorer=opt("scorer"),
                weights_sha256=model.get("weights_sha256"),
                eval_limit=int(data["eval_limit"]) if data.get("eval_limit") else None,
                scores=scores, curves=curves,
                evaluation=EvalResult.from_json(evals["masked"]) if evals.get("masked") else None,
                dense_evaluation=EvalResult.from_json(evals["dense"]) if evals.get("dense") else None,
                ablation=AblationResult.from_json(data["ablation"]) if opt("ablation") else None,
                one_per_layer=OnePerLayerResult.from_json(data["one_per_layer"]) if opt("one_per_layer") else None,
                bench=BenchResult.from_json(data["bench"]) if opt("bench") else None,
                provenance=dict(data.get("provenance") or {}),
            )
        except FormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FormatError(f"{where} is a damaged {ANALYSIS_FORMAT} file ({type(exc).__name__}: {exc}). "
                              "Download it again from the Share page.") from None

    def check_model(self, loaded) -> list[str]:
        """Check that this analysis belongs to ``loaded``; returns warnings, raises on a mismatch.

        Raises:
            FormatError: another head layout, or another model id with other weights.
        """
        if dict(self.layout.kinds) != dict(loaded.layout.kinds):
            raise FormatError(
                f"This analysis was made for model {self.model_id!r} ({self.layout.describe()}), but the model "
                f"loaded now, {loaded.model_id!r}, has {loaded.layout.describe()}. Choose model "
                f"{self.model_id!r} on the Model & data page, then load the file again.")
        same_weights = self.weights_sha256 in (None, loaded.weights_sha256)
        if not same_weights and self.model_id != str(loaded.model_id):
            raise FormatError(
                f"This analysis was made for model {self.model_id!r}, but the model loaded now is "
                f"{loaded.model_id!r} with other weights (same shape). Choose model {self.model_id!r} on the "
                "Model & data page, then load the file again.")
        if not same_weights:
            return [f"The weights of {self.model_id!r} differ from those the analysis was made with (sha256 "
                    f"{str(self.weights_sha256)[:12]}… vs {loaded.weights_sha256[:12]}…), e.g. because the default "
                    "model was prepared again. The mask applies; re-measure before comparing numbers."]
        return []


def analysis_provenance(loaded, task: str | None, settings: Mapping | None = None) -> dict:
    """Provenance of a whole analysis (model + weights hash, task, versions, time)."""
    return provenance(loaded, task=task, method="dashboard-analysis", settings=dict(settings or {}))


def read_shared_file(raw: bytes | str, name: str = "the file") -> Analysis:
    """An analysis from an uploaded file: a bundle, the HTML report, or a bare ``headprune.mask/1``.

    Raises:
        FormatError: not JSON, not a headprune file, a damaged bundle, or a mask of the wrong shape.
    """
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    stripped = text.lstrip()
    if stripped.startswith("<"):
        found = re.search(rf'<script type="application/json" id="{BUNDLE_SCRIPT_ID}">(.*?)</script>', text, re.S)
        if not found:
            raise FormatError(f"{name} is an HTML file but not a headprune report (it carries no analysis). "
                              "Load the .json bundle or the report downloaded from the Share page.")
        text = found.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{name} is not valid JSON ({exc}). Was it cut off or edited by hand?") from None
    check_format(data, None, name)
    fmt = str(data["format"])
    if fmt.startswith("headprune.mask/"):
        mask = mask_from_json(data, where=name)
        return Analysis(model_id=str(data.get("model") or ""), layout=mask.layout, mask=mask)
    if not fmt.startswith("headprune.analysis/"):
        raise FormatError(f"{name} is a {fmt!r} file; load a {ANALYSIS_FORMAT!r} bundle (or a mask file) here.")
    return Analysis.from_json(data, where=name)


# -- links -----------------------------------------------------------------------------------------

APP_PAGES = ("model_data", "head_map", "curves", "attention", "speed", "share", "smp_compare")  # = dashboard.url_path
LINK_PAGE = "head_map"


def link_base(current_url: str | None, page: str = LINK_PAGE) -> str:
    """The address of ``page`` of this app, from the address of the page the user is on.

    ``current_url`` is ``st.context.url`` (None outside a browser: then ``http://localhost:8501``).
    """
    url = (current_url or "http://localhost:8501").split("?", 1)[0].split("#", 1)[0].rstrip("/")
    head, _, last = url.rpartition("/")
    if last in APP_PAGES and "://" in head:
        url = head
    return f"{url}/{page}"


def share_link(base_url: str, params: Mapping[str, str]) -> str:
    """``base_url`` (the app's address, a page path allowed) with ``params`` as its query string."""
    base = base_url.split("?", 1)[0].split("#", 1)[0]
    return base + "?" + urllib.parse.urlencode(dict(params), quote_via=urllib.parse.quote, safe=":,/")


def decode_link(url_or_query: str, layout: HeadLayout | None = None) -> dict:
    """The choices a link carries: ``{"model", "task", "scorer", "eval_limit", "mask"}`` (None if absent).

    With ``layout``, the mask is decoded into a ``HeadMask`` and checked against it (FormatError
    if the link was made for a model of another shape); without, it stays the text form.
    """
    query = urllib.parse.urlsplit(url_or_query).query if "?" in url_or_query or "://" in url_or_query \
        else url_or_query
    qp = {k: v[-1] for k, v in urllib.parse.parse_qs(query, keep_blank_values=False).items()}
    mask = qp.get(QP_MASK)
    if mask is not None and layout is not None:
        mask = mask_from_param(mask, layout)
    limit = qp.get(QP_LIMIT)
    try:
        limit = int(limit) if limit else None
    except ValueError:
        raise FormatError(f"The link's evaluation size {limit!r} is not a number.") from None
    return {"model": qp.get(QP_MODEL), "task": qp.get(QP_TASK), "scorer": qp.get(QP_SCORER),
            "eval_limit": limit, "mask": mask}


# -- the pruned model as a zip ---------------------------------------------------------------------

def pruned_folder_name(model_id: str, mask: HeadMask) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(str(model_id).rstrip("/")).name or "model").strip("-.") or "model"
    return f"{stem}-pruned-{mask.n_kept}of{mask.n_total}-heads"


_README = """This folder is a head-pruned model saved by headprune.

Heads kept: {kept} of {total}; parameters: {params:,} (the dense model has {dense_params:,}).
The removed heads are listed in config.json under "headprune_pruned_heads" and in headprune_mask.json
(1 = kept, 0 = removed).

Load it with headprune (it rebuilds the smaller attention layers before loading the weights):

    from pruning_core.models import load_model
    loaded = load_model("{name}")          # loaded.model is a transformers model

or evaluate it from the command line:  headprune eval --model {name} ...
"""


def pruned_model_zip(loaded, mask: HeadMask, *, name: str | None = None) -> bytes:
    """The physically pruned copy of ``loaded`` (model + tokenizer + mask), zipped into one folder.

    ``loaded.model`` is not modified (``prune_heads`` works on a deep copy). The zip holds one folder
    ``name`` (default: ``<model>-pruned-<kept>of<total>-heads``) that ``load_model`` can open.
    """
    mask.check_fits(loaded.layout)
    name = name or pruned_folder_name(loaded.model_id, mask)
    pruned = prune_heads(loaded.model, mask)
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="headprune-zip-") as tmp:
        folder = save_pruned(pruned, loaded.tokenizer, Path(tmp) / name)
        (folder / "headprune_mask.json").write_text(
            json.dumps(mask_to_json(mask, str(loaded.model_id), provenance(loaded, method="prune")), indent=1) + "\n",
            encoding="utf-8")
        (folder / "README.txt").write_text(_README.format(
            kept=mask.n_kept, total=mask.n_total, params=parameter_count(pruned),
            dense_params=parameter_count(loaded.model), name=name), encoding="utf-8")
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
