"""The audio-alignment role on the real prepared Whisper-base: its top 8 cross-attention heads share at least 5 with
the 8 ``alignment_heads`` of the model's generation config (chance: 8 x 8 / 48 = 1.3; the benchmark's 6, less one for
another CPU's rounding of near-equal peaks), where the first-token
role's top 8 share fewer. Skips, naming the command, when Whisper-base or espeak-ng is missing."""
import shutil

import pytest

from pruning_core.analysis.roles import compute_roles
from pruning_core.analysis.roles.alignment import compare_listed, listed_alignment_heads
from pruning_core.modeling.sources import catalog
from pruning_core.modeling.sources.loading import load_model

pytestmark = pytest.mark.slow


def test_the_alignment_role_finds_whispers_listed_alignment_heads():
    if not catalog.get("whisper-base").is_prepared():
        pytest.skip("Whisper-base is not prepared: run `headprune prepare --model whisper-base`")
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (it speaks the probe sentences)")
    loaded = load_model("whisper-base", attn_implementation="eager")
    listed = listed_alignment_heads(loaded)
    assert listed is not None and len(listed) == 8
    report = compute_roles(loaded, roles=["alignment", "first_token"], seed=0)       # the benchmark's probe
    found = compare_listed(report.scores["alignment"]["cross"], listed)
    sink = compare_listed(report.scores["first_token"]["cross"], listed)
    assert len(found["hits"]) >= 5 and len(sink["hits"]) < len(found["hits"]), (found, sink)
