"""The rows of docs/FIGURES.md and the few ways a figure is written. A summariser (one per result kind, registered
in ``benchmarks/figures.py``) turns the result files of its kind into ``Row``s; every number in a row is a field of
those files, written here with the precision its summariser asks for."""
from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Iterable


@dataclass(frozen=True)
class Row:
    """One line of a table: what was measured, the figure, the machine and its load, the command that reproduces
    it, the result files it comes from (to name them and to see whether they are stale), and why the row itself is
    stale where its files are not (a section of a run that failed and was run again)."""
    what: str
    figure: str
    machine: str
    command: str
    sources: tuple[str, ...]
    stale: str | None = None


def fixed(x: float, d: int = 2, sep: bool = False) -> str:
    """``x`` rounded half up to ``d`` decimals as its JSON text reads (3.175 -> '3.18', where binary floats
    give '3.17'), with thousands separators if ``sep``."""
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_UP)
    return f"{q:,}" if sep else str(q)


def sig(x: float, n: int = 4) -> str:
    """``x`` to ``n`` significant digits, rounded half up: 31.709 -> '31.71', 0.16788 -> '0.1679'."""
    d = Decimal(repr(float(x)))
    return fixed(x, max(0, n - 1 - d.adjusted()))


def num(x: float, d: int = 2) -> str:
    """``x`` with ``d`` decimals and thousands separators: 22713986 -> '22,713,986'."""
    return fixed(x, d, sep=True)


def sec(x: float, d: int = 2) -> str:
    return f"{fixed(x, d)} s"


def times(x: float, d: int = 2) -> str:
    return f"{fixed(x, d)}x"


def pct(x: float, d: int = 1) -> str:
    """A share written as a percentage: 0.9345 -> '93.5 %'."""
    return f"{fixed(100 * x, d)} %"


def median_range(stats: dict, d: int = 2, unit: str = " s") -> str:
    """A ``{median, min, max}`` record: '0.78 s (0.44 to 1.12)'; a single value without its range."""
    if stats["min"] == stats["max"]:
        return f"{fixed(stats['median'], d)}{unit}"
    return f"{fixed(stats['median'], d)}{unit} ({fixed(stats['min'], d)} to {fixed(stats['max'], d)})"


def when(doc: dict) -> str:
    """When a result was written, to the minute (UTC), from the first of the places the benchmarks keep it."""
    prov = doc.get("provenance") or {}
    stamp = doc.get("created") or prov.get("created") or prov.get("started") or ""
    return stamp[:16].replace("T", " ") or "date not recorded"


def load(values: Iterable[float | None]) -> str:
    """The 1-minute load averages a run recorded, as 'load lo to hi' with one decimal."""
    seen = [v for v in values if isinstance(v, (int, float))]
    if not seen:
        return "load not recorded"
    lo, hi = min(seen), max(seen)
    return f"load {fixed(lo, 1)}" if fixed(lo, 1) == fixed(hi, 1) else f"load {fixed(lo, 1)} to {fixed(hi, 1)}"


def cpu(doc: dict) -> str:
    """The CPU a result records, in a few words: '2-core Intel Xeon (AMX)', '2 cores', or '' when it has none."""
    info = doc.get("cpu") or doc.get("machine") or {}
    if isinstance(info, str):
        info = {"name": info, "cores": doc.get("cores")}
    name = info.get("name") or info.get("cpu") or ""
    for noise in ("(R)", " Processor", "Intel "):
        name = name.replace(noise, "")
    name = name.strip()
    cores = info.get("cores") or info.get("cpus") or doc.get("cores") or doc.get("cpus")
    text = f"{cores}-core {name}" if cores and name else f"{cores} cores" if cores else name
    if name and (info.get("amx_bf16") or info.get("avx512_bf16")):
        text += " (AMX)" if info.get("amx_bf16") else " (AVX-512 bf16)"
    return text


def threads(doc: dict) -> str:
    info = doc.get("machine") if isinstance(doc.get("machine"), dict) else {}
    n = doc.get("cpu_threads") or doc.get("torch_threads") or doc.get("threads") or info.get("torch_threads")
    return f"{n} thread{'' if str(n) == '1' else 's'}" if n else ""


def machine(doc: dict, loads: Iterable[float | None] | None, extra: str = "") -> str:
    """The machine column: when, which CPU with how many threads, anything else the run set (a window size), and
    the load (``None``: a result whose figures do not depend on it, such as an accuracy)."""
    parts = [when(doc), cpu(doc), threads(doc), extra, "" if loads is None else load(loads)]
    return ", ".join(p for p in parts if p)
