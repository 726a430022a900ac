"""Loading a pruned folder the way a user without headprune would: a fresh interpreter that imports torch and
transformers only (``PYTHONPATH`` dropped), ``AutoModelForCausalLM.from_pretrained``, eager attention."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

# argv: folder, input ids (JSON), where to save the logits; prints the per-layer q/k widths and whether
# headprune was imported at all
STOCK_SCRIPT = """
import json, sys, torch, transformers
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], attn_implementation="eager").eval()
with torch.no_grad():
    logits = model(input_ids=torch.tensor(json.loads(sys.argv[2]))).logits
torch.save(logits, sys.argv[3])
heads = [(l.self_attn.q_proj.out_features, l.self_attn.k_proj.out_features) for l in model.model.layers]
print(json.dumps({"heads": heads, "headprune": sorted(m for m in sys.modules if m.split(".")[0] == "pruning_core")}))
"""


def stock_run(folder: Path, cwd: Path, ids: list[list[int]], timeout: float = 300) -> dict:
    """``{"logits": [B, T, vocab] tensor, "heads": [[q width, k width] per layer], "headprune": [modules]}``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = Path(cwd) / "stock-logits.pt"
    proc = subprocess.run([sys.executable, "-c", STOCK_SCRIPT, str(folder), json.dumps(ids), str(out)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["logits"] = torch.load(out)
    return result
