"""docs/images/long_context_curves.svg from benchmarks/results/long_context_curves.json: per model, length and share
streaming, each task's accuracy under every policy with its 95 % interval (random: one mark per seed), as a dot plot.

    .venv/bin/python benchmarks/curves_figure.py        # after benchmarks/long_context_curves.py; no extra package

Plain SVG written by hand, so the figure needs nothing beyond the standard library and can be regenerated anywhere.
"""
from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks" / "results" / "long_context_curves.json"
OUT = ROOT / "docs" / "images" / "long_context_curves.svg"
POLICIES = {"full": ("full cache", "#1f77b4"), "retrieval": ("retrieval heads kept full", "#1b9e77"),
            "razor": ("retrieval + induction kept full", "#7570b3"),
            "budgets": ("per-head budgets (retrieval split)", "#e6ab02"), "random": ("random heads stream", "#999999"),
            "streaming": ("every head streams", "#d95f02")}
LEFT, RIGHT, ROW, TOP = 190, 560, 16, 40             # plot's left and right edge, a third of a task's height, top


def panels(doc: dict) -> dict[tuple, dict[str, list[tuple[str, dict]]]]:
    """``(model, length, fraction) -> task -> [(policy, row), ...]``; the full cache and every head streaming join
    every share's panel."""
    out: dict[tuple, dict[str, list[tuple[str, dict]]]] = {}
    rows = [(k.split("|"), r) for k, r in doc["rows"].items()]
    shares = {(m, int(n), f) for (m, _, n, p, f, _), _ in rows if p not in ("full", "streaming")}
    for model, length, fraction in shares:
        tasks = out.setdefault((model, length, fraction), {})
        for (m, task, n, policy, f, _), row in rows:
            if m == model and int(n) == length and (f == fraction or policy in ("full", "streaming")):
                tasks.setdefault(task, []).append((policy, row))
    return out


def svg(doc: dict) -> str:
    parts, y = [], TOP
    for (model, length, fraction), tasks in sorted(panels(doc).items()):
        parts.append(f'<text x="10" y="{y}" font-weight="bold">{escape(model)}, {length:,} tokens, '
                     f'{float(fraction):.0%} of key/value heads streaming (accuracy, 95 % Wilson interval)</text>')
        y += 14
        for x in range(0, 101, 25):
            px = LEFT + (RIGHT - LEFT) * x / 100
            parts.append(f'<line x1="{px}" x2="{px}" y1="{y}" y2="{y + ROW * len(tasks) * 3}" stroke="#ddd"/>'
                         f'<text x="{px}" y="{y + ROW * len(tasks) * 3 + 12}" text-anchor="middle" '
                         f'font-size="10">{x} %</text>')
        for task, entries in sorted(tasks.items()):
            parts.append(f'<text x="{LEFT - 8}" y="{y + 1.5 * ROW + 4}" text-anchor="end">{escape(task)}</text>')
            order = sorted(entries, key=lambda e: list(POLICIES).index(e[0]))
            for i, (policy, row) in enumerate(order):
                name, colour = POLICIES.get(policy, (policy, "#444"))
                cy = y + 4 + i * (3 * ROW - 8) / max(len(order) - 1, 1)
                lo, hi = (LEFT + (RIGHT - LEFT) * v for v in row["wilson_95"])
                cx = LEFT + (RIGHT - LEFT) * row["accuracy"]
                parts.append(f'<line x1="{lo:.1f}" x2="{hi:.1f}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="{colour}"/>'
                             f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{colour}"><title>{escape(name)}: '
                             f'{row["correct"]}/{row["examples"]}</title></circle>')
            y += 3 * ROW
        y += 30
    legend = "".join(f'<circle cx="{LEFT + 10}" cy="{y + 14 * i}" r="4" fill="{c}"/>'
                     f'<text x="{LEFT + 20}" y="{y + 14 * i + 4}">{escape(n)}</text>'
                     for i, (n, c) in enumerate(POLICIES.values()))
    height = y + 14 * len(POLICIES) + 10
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{RIGHT + 30}" height="{height}" '
            f'font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" fill="white"/>\n'
            + "\n".join(parts) + "\n" + legend + "\n</svg>\n")


def main() -> int:
    doc = json.loads(SOURCE.read_text(encoding="utf-8"))
    OUT.write_text(svg(doc), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
