"""Rows for the figures no benchmark writes (a ``time`` of a command, a count from the data, a screenshot), kept by
hand in ``benchmarks/results/hand_kept.json``, each with its machine, load, command, date and the commit that
recorded it (``recorded_in``)."""
from __future__ import annotations

from . import Row


def rows(docs: dict[str, dict]) -> list[Row]:
    out = []
    for name, doc in docs.items():
        for r in doc["rows"]:
            where = ", ".join(p for p in (r["date"], r["machine"], r["load"]) if p)
            out.append(Row(r["what"], r["figure"], where, r["command"], (name,), stale=r.get("stale")))
    return out
