"""One session's analysis as data: the ``headprune.analysis/1`` bundle, and reading shared files.

:class:`Analysis` is the whole analysis of one session: model, task, scorer, mask, and whatever
results exist (scores, curves, evaluations, ablation tables, benchmark), with provenance. It is
written as one ``headprune.analysis/1`` JSON file that embeds the project's own formats
(``headprune.mask/1``, ``scores/1``, ``curve/1``, ``eval/1``, ``ablation/1``, ``one_per_layer/1``,
``bench/1``) unchanged, and read back by :func:`read_shared_file`, which also accepts a plain
mask file and the HTML report (it carries the bundle inside).

Pure: no Streamlit, no session state; everything here takes data.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pruning_core.bench import BenchResult
from pruning_core.core.io.codec import ANALYSIS_FORMAT, MASK_FORMAT, format_family, loads
from pruning_core.core.errors import FormatError
from pruning_core.evaluation.experiments import AblationResult, CurveResult, OnePerLayerResult
from pruning_core.core.heads import HeadLayout, HeadMask
from pruning_core.evaluation.results import (
    EvalResult,
    ScoreResult,
    check_format,
    mask_from_json,
    mask_to_json,
    provenance,
)
from pruning_core.core.io.share_link import SharedLink, encode_mask

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
    eval_size: int | None = None                      # examples evaluated (written as the format's "eval_limit")
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
        """The query parameters of a link to this analysis (see :func:`app.share.links.share_link`)."""
        return link_params(self.model_id, self.task, self.scorer, self.eval_size, self.mask)

    def to_json(self) -> dict:
        """The ``headprune.analysis/1`` bundle; each result keeps its own format and provenance."""
        # by hand: a bundle of other formats' documents, each written by its own to_json, and the link
        evals = {}
        if self.evaluation is not None:
            evals["masked"] = self.evaluation.to_json(self.eval_provenance(self.evaluation), mask=self.mask)
        if self.dense_evaluation is not None:
            evals["dense"] = self.dense_evaluation.to_json(self.eval_provenance(self.dense_evaluation),
                                                           mask=HeadMask.full(self.layout))
        return {
            "format": ANALYSIS_FORMAT,
            "model": {"id": self.model_id, "weights_sha256": self.weights_sha256, "layout": self.layout.to_json()},
            "task": self.task,
            "scorer": self.scorer,
            "eval_limit": self.eval_size,
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

    def eval_provenance(self, result: EvalResult) -> dict:
        """The provenance of one evaluation in the bundle: the analysis's (model, task, split,
        versions, seeds) with that evaluation's own example count."""
        return {**dict(self.provenance), "method": "evaluate", "n_examples": result.n_examples}

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
            for key in ("task", "scorer"):
                if not isinstance(opt(key), (str, type(None))):
                    raise FormatError(f"{where} has a {key} {str(opt(key))[:40]!r} that is not a name. "
                                      "Download it again from the Share page.")
            eval_size = opt("eval_limit")
            if eval_size is not None and (isinstance(eval_size, bool) or not isinstance(eval_size, int) or eval_size < 1):
                raise FormatError(f"{where} has an eval_limit {str(eval_size)[:40]!r} that is not a whole number of "
                                  "examples. Download it again from the Share page.")
            return cls(
                model_id=str(model["id"]), layout=layout, mask=mask, task=opt("task"), scorer=opt("scorer"),
                weights_sha256=model.get("weights_sha256"), eval_size=eval_size,
                scores=scores, curves=curves,
                evaluation=EvalResult.from_json(evals["masked"]) if evals.get("masked") else None,
                dense_evaluation=EvalResult.from_json(evals["dense"]) if evals.get("dense") else None,
                ablation=AblationResult.from_json(data["ablation"]) if opt("ablation") else None,
                one_per_layer=OnePerLayerResult.from_json(data["one_per_layer"]) if opt("one_per_layer") else None,
                bench=BenchResult.from_json(data["bench"]) if opt("bench") else None,
                provenance=dict(data.get("provenance") or {}),
            )
        except FormatError as exc:                  # an embedded result's own message: say which file it is in
            raise exc if where in str(exc) else FormatError(f"{where} has a damaged part: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as exc:
            raise FormatError(f"{where} is a damaged {ANALYSIS_FORMAT} file ({type(exc).__name__}: "
                              f"{str(exc)[:120]}). Download it again from the Share page.") from None

    def check_model(self, loaded) -> list[str]:
        """Check that this analysis belongs to ``loaded``; returns warnings, raises on a mismatch.

        Raises:
            FormatError: another head layout, or another model id with other weights.
        """
        if dict(self.layout.kinds) != dict(loaded.layout.kinds):
            if self.model_id in ("", str(loaded.model_id)):     # names the loaded model: the mask is what is wrong
                try:
                    self.mask.check_fits(loaded.layout)
                except FormatError as exc:
                    detail = str(exc)
                raise FormatError(
                    f"This file's mask does not fit model {str(loaded.model_id)!r}, which is loaded now: {detail} "
                    "(The file names this model but was made for another shape, or was edited.)")
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


def link_params(model_id: str, task: str | None, scorer: str | None, eval_size: int | None,
                mask: HeadMask) -> dict[str, str]:
    """The query parameters of a link to ``mask`` on this model, task, scorer and evaluation size (known before any
    analysis is gathered: the Share page shows its link at once)."""
    return SharedLink(model=model_id, task=task or None, scorer=scorer or None, eval_limit=eval_size or None,
                      mask=None if mask.is_full() else encode_mask(mask)).params()


def analysis_provenance(loaded, task: str | None, settings: Mapping | None = None, *, split: str | None = None,
                        n_examples: int | None = None) -> dict:
    """Provenance of a whole analysis (model + weights hash, task, evaluation split and example
    count, settings with the seeds, versions, time)."""
    return provenance(loaded, task=task, split=split, n_examples=n_examples, method="dashboard-analysis",
                      settings=dict(settings or {}))


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
    data = loads(text, name)
    check_format(data, None, name)
    fmt = str(data["format"])
    if fmt.startswith(format_family(MASK_FORMAT)):
        mask = mask_from_json(data, where=name)
        return Analysis(model_id=str(data.get("model") or ""), layout=mask.layout, mask=mask)
    if not fmt.startswith(format_family(ANALYSIS_FORMAT)):
        raise FormatError(f"{name} is a {fmt!r} file; load a {ANALYSIS_FORMAT!r} bundle (or a mask file) here.")
    return Analysis.from_json(data, where=name)
