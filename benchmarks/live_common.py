"""What the live-click benchmarks share (``live_clicks.py``, ``seq2seq_live.py``): the repository on the path, the
dashboard's OpenMP policy set before torch loads, where results go, the 1-minute load and the machine a run had."""
from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # as dashboard.py sets it

import torch  # noqa: E402


def load_1min() -> float:
    """The 1-minute load average, rounded: what the machine was doing beside a timing."""
    return round(os.getloadavg()[0], 2)


def machine() -> dict:
    """The CPU model, its flags that matter to float32 and bf16 kernels, cores, torch threads and versions."""
    model, flags = platform.processor(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "avx512f": "avx512f" in flags, "avx512_bf16": "avx512_bf16" in flags, "amx_bf16": "amx_bf16" in flags,
            "torch": torch.__version__, "python": platform.python_version(),
            "omp": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}}
