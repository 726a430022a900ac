"""A head mask in a URL: the text form the dashboard keeps in its ``mask`` query parameter, and
the reading of a whole shared dashboard link.

Text form (1 = keep, 0 = removed): ``e:fff.fdf,c:ff.f0``: one ``<kind code>:<layers>`` part per kind (``e``
encoder_self, ``d`` decoder_self, ``c`` cross), layers joined by ``.``, each layer's keep bits read as a binary
number (head 0 the most significant bit) in ``ceil(heads / 4)`` hex digits; a layer with no heads is empty.
A link carries ``model``, ``task``, ``scorer``, ``n`` (evaluation size) and ``mask``; :func:`parse_link` reads
them from a URL or a query string. The dashboard, its Share page and ``headprune evaluate --mask-link URL``
all use this one module, so a link, the address bar and the command line never disagree.
"""
from __future__ import annotations

import string
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from pruning_core.core.errors import FormatError, HeadpruneError
from pruning_core.core.heads import KIND_LABELS, HeadLayout, HeadMask

_COPY_AGAIN = "Copy the whole link again from the dashboard's Share page."

# query parameter names of a dashboard link
QP_MODEL, QP_TASK, QP_SCORER, QP_MASK, QP_LIMIT = "model", "task", "scorer", "mask", "n"

KIND_CODES = {"encoder_self": "e", "decoder_self": "d", "cross": "c"}
_CODE_KIND = {v: k for k, v in KIND_CODES.items()}


def encode_mask(mask: HeadMask) -> str:
    """The URL text form of ``mask`` (see the module docstring), e.g. ``e:b.f`` for 2 x 4 heads."""
    parts = []
    for kind, rows in mask.kinds.items():
        layers = []
        for row in rows:
            n = len(row)
            layers.append(format(int("".join(str(int(v)) for v in row), 2), f"0{(n + 3) // 4}x") if n else "")
        parts.append(f"{KIND_CODES[kind]}:{'.'.join(layers)}")
    return ",".join(parts)


def decode_mask(text: str, layout: HeadLayout) -> HeadMask:
    """Inverse of :func:`encode_mask` for a model with ``layout``.

    Raises:
        FormatError: unreadable text, or a mask made for a model of another shape.
    """
    kinds: dict[str, list[list[int]]] = {}
    try:
        for part in text.split(","):
            code, _, body = part.partition(":")
            kind = _CODE_KIND[code.strip()]
            if kind in kinds:
                raise ValueError(f"{kind} is given twice")
            sizes = layout.kinds.get(kind)
            layers = body.split(".")
            if sizes is not None and len(layers) < len(sizes):
                raise FormatError(_cut_short(f"{len(layers)} of the model's {len(sizes)} {KIND_LABELS[kind]} layers"))
            if sizes is None or len(layers) != len(sizes):
                raise FormatError(f"The mask in the link has {len(layers)} {KIND_LABELS[kind]} layers; the model has "
                                  f"{len(sizes) if sizes else 0}. The link was made for another model: {_OPEN_WITH}")
            rows = []
            for hexbits, n in zip(layers, sizes):
                width = (n + 3) // 4
                if len(hexbits) != width or not set(hexbits) <= set(string.hexdigits):
                    raise ValueError(f"layer {len(rows)} of {kind} is {hexbits!r}; it must be exactly {width} "
                                     f"hex digit{'s' if width != 1 else ''}")
                value = int(hexbits, 16) if hexbits else 0
                if value >= 1 << n:
                    raise FormatError(f"The mask in the link has more than {n} heads in a {kind} layer; "
                                      f"it was made for another model: {_OPEN_WITH}")
                rows.append([int(b) for b in format(value, f"0{n}b")] if n else [])
            kinds[kind] = rows
    except (KeyError, ValueError) as exc:
        if isinstance(exc, HeadpruneError):
            raise
        raise FormatError(f"The mask in the link ({text[:40]!r}) is not readable: {str(exc).rstrip('.')}. "
                          f"{_COPY_AGAIN}") from None
    missing = [k for k in layout.kinds if k not in kinds]
    if missing and all(k in layout.kinds for k in kinds):
        raise FormatError(_cut_short(f"no {' or '.join(missing)} layers, which the model has"))
    mask = HeadMask.from_lists(kinds)
    mask.check_fits(layout)
    return mask


_OPEN_WITH = "open it with the model it was made for (the link's 'model=')."


def _cut_short(what: str) -> str:
    """The message for a mask that stops early: most likely a link cut when it was copied."""
    return (f"The mask in the link stops early: it has {what}. The link was probably cut short when it "
            "was copied: copy the whole link again from the Share page (or, if it was made for a smaller "
            "model, open it with that model).")


@dataclass(frozen=True)
class SharedLink:
    """The choices a dashboard link carries; a field is None when the link leaves it out.

    ``mask`` is the URL text form; decode it with :meth:`head_mask` once the model's layout is known.
    """

    model: str | None = None
    task: str | None = None
    scorer: str | None = None
    eval_limit: int | None = None
    mask: str | None = None

    def head_mask(self, layout: HeadLayout) -> HeadMask | None:
        """The link's mask checked against ``layout`` (None when the link has none)."""
        return decode_mask(self.mask, layout) if self.mask else None

    def params(self) -> dict[str, str]:
        """The query parameters of this link, in the dashboard's order, fields that are None left out."""
        pairs = ((QP_MODEL, self.model), (QP_TASK, self.task), (QP_SCORER, self.scorer),
                 (QP_LIMIT, None if self.eval_limit is None else str(self.eval_limit)), (QP_MASK, self.mask))
        return {k: v for k, v in pairs if v is not None}


def parse_link(url_or_query: str) -> SharedLink:
    """Read a dashboard link (``http://host/head_map?model=...&mask=...``) or its bare query string.

    Raises:
        FormatError: not a readable http(s) link (brackets in the host, a port that is not a number, spaces),
            or an evaluation size ``n`` that is not a whole number of at least 1.
    """
    qp = {k: v[-1] for k, v in urllib.parse.parse_qs(_query_of(url_or_query), keep_blank_values=False).items()}
    limit = qp.get(QP_LIMIT)
    try:
        limit = int(limit) if limit else None
    except ValueError:                                # not digits, or more digits than int() reads
        limit = 0
    if limit is not None and limit < 1:
        raise FormatError(f"The link's evaluation size n={qp[QP_LIMIT][:20]!r} is not a whole number of at least "
                          f"1. {_COPY_AGAIN}")
    return SharedLink(model=qp.get(QP_MODEL), task=qp.get(QP_TASK), scorer=qp.get(QP_SCORER), eval_limit=limit,
                      mask=qp.get(QP_MASK))


def _query_of(text: str) -> str:
    """The query string of a link, or ``text`` itself when it is a bare query string (no ``://``, no ``?``)."""
    text = text.strip()
    if "://" not in text:
        return text.split("?", 1)[1].split("#", 1)[0] if "?" in text else text
    fix = "Copy the whole link again from the dashboard's Share page (and quote it on a command line)."
    if any(c.isspace() for c in text):
        raise FormatError(f"The link {text[:80]!r} has a space or a line break in it, which a link never has. {fix}")
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port                      # raises on a port that is not a number
    except ValueError as exc:
        brackets = "; brackets belong only around an IPv6 address" if "[" in text or "]" in text else ""
        raise FormatError(f"The link {text[:80]!r} is not a readable URL ({exc}{brackets}). {fix}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FormatError(f"The link {text[:80]!r} is not an http(s) link to the dashboard. {fix}")
    return parts.query


def build_link(base_url: str, params: Mapping[str, str]) -> str:
    """``base_url`` (the app's address, a page path allowed) with ``params`` as its query string."""
    base = base_url.split("?", 1)[0].split("#", 1)[0]
    return base + "?" + urllib.parse.urlencode(dict(params), quote_via=urllib.parse.quote, safe=":,/")


def mask_from_link(url: str, layout: HeadLayout) -> HeadMask:
    """The mask a shared dashboard link carries, checked against ``layout``.

    Raises:
        FormatError: the link has no ``mask`` parameter (all heads kept: no mask is needed), or
            its mask is unreadable or made for a model of another shape.
    """
    mask = parse_link(url).head_mask(layout)
    if mask is None:
        raise FormatError(f"The link {url[:80]!r} carries no mask (no 'mask=' parameter: all heads kept). "
                          "Copy the link from the dashboard's Share page after removing heads.")
    return mask
