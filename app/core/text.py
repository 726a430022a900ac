"""Showing values that came from outside (a link, a file, a text box, an error) in Markdown.

Every Streamlit element that takes text (``st.markdown``, ``st.caption``, ``st.error`` and the
other alerts, titles, widget labels) renders it as Markdown: a value holding ``](``, ``![`` or a
backtick could otherwise add a link or an image (which the browser fetches) to the page. Pages
and app modules therefore pass every such value through one of the two helpers below:

- :func:`md_code` for a value shown as inline code (model, task, scorer, file names);
- :func:`md_escape` for a value shown as plain text (error messages, labels from a file).

Beside them, :func:`measured_text`: when and under what load a timing was measured (every latency figure says it).
Pure: no Streamlit; ``tests/app/test_app_safety.py`` renders the results with a CommonMark parser.
"""
from __future__ import annotations

import datetime as _dt
import re
import string
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pruning_core.bench import BenchResult

_PUNCTUATION = frozenset(string.punctuation)   # CommonMark lets a backslash escape any of these
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
_BACKTICKS = re.compile(r"`+")
_WORDS = re.compile(r"(\s+)")
# what GFM turns into a link by itself, escaped or not ("http://...", "www.x", "a@b.c"): it finds
# these in the text after parsing, so only a code span keeps them plain
_AUTOLINK = re.compile(r"(?i)://|www\.|@[^\s@]*\.|\b(?:mailto|xmpp):")


def md_escape(value: object) -> str:
    """``value`` as Markdown that renders to exactly its text: every ASCII punctuation character
    is backslash-escaped, so no link, image, emphasis, HTML, heading, list, LaTeX (``$``) or
    Streamlit directive (``:red[...]``, ``:material/...:``) can start inside it; words GFM would
    link by themselves (URLs, ``www.``, e-mail addresses) are shown as inline code instead."""
    return "".join(md_code(word) if _AUTOLINK.search(word)
                   else "".join("\\" + ch if ch in _PUNCTUATION else ch for ch in word)
                   for word in _WORDS.split(str(value)))


def md_code(value: object) -> str:
    """``value`` as one inline code span, whatever it holds.

    Nothing inside a code span is Markdown; the span is fenced with one backtick more than the
    longest run of backticks in the value (padded with a space where the value starts or ends
    with a backtick or a space), and line breaks become spaces so the span cannot be cut short.
    """
    text = _LINE_BREAKS.sub(" ", str(value))
    if not text:
        return "` `"
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


__all__ = ["md_code", "md_escape", "measured_text"]


def data_set_names(rows: list[dict], key: str = "audio") -> list[dict]:
    """``rows`` with each ``key`` file path shown relative to the folder the rows' files share (the data
    set's), so a table does not print where the server keeps its files."""
    import os.path

    paths = [str(r[key]) for r in rows if isinstance(r.get(key), str)]
    if not paths:
        return rows
    base = os.path.dirname(paths[0]) if len(paths) == 1 else os.path.commonpath(paths)
    return [{**r, key: os.path.relpath(r[key], base)} if isinstance(r.get(key), str) else r for r in rows]

def measured_text(result: BenchResult, now: _dt.datetime | None = None) -> str:
    """When and under what load ``result`` was measured: 'measured 08:21:05 UTC (3 min ago); load average
    2.10 before, 2.40 after, on 2 CPUs'. Shown beside every latency figure, since a stored
    measurement may be replayed later."""
    created = (result.provenance or {}).get("created")
    when = "at an unknown time"
    if created:
        try:
            stamp = _dt.datetime.fromisoformat(created)
        except ValueError:
            stamp = None
        if stamp is not None:
            now = now or _dt.datetime.now(_dt.timezone.utc)
            age = max(0, int((now - stamp).total_seconds()))
            ago = f"{age} s ago" if age < 120 else f"{age // 60} min ago" if age < 7200 else f"{age // 3600} h ago"
            when = f"at {stamp.astimezone(_dt.timezone.utc):%H:%M:%S} UTC ({ago})"
    m = result.machine or {}

    def load(key: str) -> str:
        value = m.get(key)
        return f"{value[0]:.2f}" if value else "n/a"

    return (f"measured {when}; load average {load('load_before')} before, {load('load_after')} after, "
            f"on {m.get('cpus') or '?'} CPUs")
