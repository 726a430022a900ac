"""`headprune roles` on the real SmolLM2-135M (prepared: `headprune prepare --model smollm2`) finds the induction
heads that an independent computation finds: plain transformers, eager attention, output_attentions on
[BOS] + R + R with other random tokens (its own generator and seed), scored here without the roles package.
About 1 min on 2 idle cores."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tiny import prepared_folder

pytestmark = pytest.mark.slow
N, BATCH, TOP = 50, 10, 5


@pytest.fixture(scope="module")
def folder():
    return prepared_folder("smollm2", "needs `pip install gguf accelerate`; about 2 min")


def _independent_induction(folder) -> np.ndarray:
    """[layers, heads]: mean attention from each second-copy token to the token after its first occurrence."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    special = set(tok.all_special_ids)
    allowed = torch.tensor([i for i in range(len(tok)) if i not in special])
    g = torch.Generator().manual_seed(1234)
    r = allowed[torch.randint(len(allowed), (BATCH, N), generator=g)]
    ids = torch.cat([torch.full((BATCH, 1), model.config.bos_token_id), r, r], dim=1)     # [B, 1 + 2N]
    with torch.no_grad():
        attentions = model(input_ids=ids, output_attentions=True).attentions                 # layers x [B, H, T, T]
    queries = torch.arange(N + 1, 2 * N + 1)                                                # the second copy
    return np.stack([a[:, :, queries, queries - (N - 1)].mean(dim=(0, 2)).numpy() for a in attentions])


def _top(grid: np.ndarray, k: int) -> set[tuple[int, int]]:
    order = np.argsort(grid, axis=None)[::-1][:k]
    return {tuple(int(x) for x in np.unravel_index(i, grid.shape)) for i in order}


def test_roles_finds_the_induction_heads_an_independent_computation_finds(folder):
    from pruning_core.modeling.sources.loading import load_model
    from pruning_core.analysis.roles import compute_roles
    report = compute_roles(load_model("smollm2", device="cpu"), roles=["induction"], seed=0)
    ours = report.scores["induction"]["decoder_self"]
    theirs = _independent_induction(folder)
    assert ours.shape == theirs.shape == (30, 9)
    assert len(_top(ours, TOP) & _top(theirs, TOP)) >= TOP - 1, (_top(ours, TOP), _top(theirs, TOP))
    detected = {(l, h) for _, l, h in report.heads("induction")}
    assert detected and detected <= _top(theirs, 2 * len(detected))
    assert theirs[tuple(np.array(list(detected)).T)].min() > 0.3      # each of ours scores high there too
