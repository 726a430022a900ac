"""The sentences the Curves page and the Tour write about a result, so both say it in the same words.

Pure: no Streamlit.
"""
from __future__ import annotations

from pruning_core.core.heads import KIND_LABELS

ORDERS = (("importance", "least important first"), ("random", "in random order"))


def kinds_headline(result) -> str:
    """Which kind is most sensitive under each removal order of a
    :class:`~pruning_core.evaluation.kinds.KindSensitivity`, and whether it leads the next kind beyond
    noise (its 95 % intervals apart at some share) or within it (overlapping at every share)."""
    parts, tops = [], {}
    for method, words in ORDERS:
        ranked = result.ranked(method)
        tops[method] = top = ranked[0]
        text = f"{words}: **{KIND_LABELS[top]}**"
        if len(ranked) > 1:
            apart, runner = result.apart(top, ranked[1], method), KIND_LABELS[ranked[1]]
            if apart is False:
                text += f", within noise of {runner} (their 95 % intervals overlap at every share)"
            elif apart:
                text += f", beyond noise ahead of {runner} (their 95 % intervals apart at some share)"
        parts.append(text)
    shares = ", ".join(f"{100 * f:g} %" for f in sorted({p.fraction for p in result.points}))
    line = f"Most sensitive, {'; '.join(parts)}. Most sensitive: the largest mean worsening over the shares {shares}."
    if tops["importance"] != tops["random"]:
        line += (f" The two orders disagree: removed at random, {KIND_LABELS[tops['random']]} heads cost the most; "
                 f"removed least important first, the ranking keeps the few of them that matter.")
    return line
