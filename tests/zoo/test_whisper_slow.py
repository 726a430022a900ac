"""Integration test on the real prepared Whisper-base: speech synthesized by espeak-ng is transcribed, and a
pruned copy decodes exactly as the masked model (every head of one cross-attention layer removed, plus a few
encoder and decoder heads). Skips, naming the command, when Whisper-base is not prepared here."""
import shutil

import pytest
import torch

from pruning_core.modeling.sources import catalog
from pruning_core.tasks.data import speech
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask, installed_hook_count
from pruning_core.modeling.sources.loading import load_model
from pruning_core.modeling.pruning import prune_heads
from pruning_core.tasks import get_task

pytestmark = pytest.mark.slow
SENTENCES = ("This film is a wonderful story about friendship.", "The acting was good but the plot was dull.")


@pytest.fixture(scope="module")
def whisper():
    if not catalog.get("whisper-base").is_prepared():
        pytest.skip("Whisper-base is not prepared: run `headprune prepare --model whisper-base`")
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (it speaks the test sentences)")
    return load_model("whisper-base")


@pytest.fixture(scope="module")
def spoken(tmp_path_factory):
    folder = tmp_path_factory.mktemp("speech")
    for i, text in enumerate(SENTENCES):
        (folder / f"{i}.wav").write_bytes(speech.encode_wav(speech.synthesize(text)))
        (folder / f"{i}.txt").write_text(text)
    return get_task(f"speech:{folder}")


def test_whisper_base_layout_and_transcripts(whisper, spoken):
    assert whisper.layout.kinds == {k: (8,) * 6 for k in ("encoder_self", "decoder_self", "cross")}
    data = spoken.encode(whisper, "test")
    result = spoken.evaluate(whisper, data, batch_size=2)
    assert result.metric_name == "wer" and result.metric <= 0.2, result.extra["samples"]
    assert 0 < result.loss < 2.0


def test_whisper_base_pruned_decodes_as_masked(whisper, spoken):
    data = spoken.encode(whisper, "test")
    features = next(data.batches(1)).inputs["input_features"]
    removed = [("cross", 5, h) for h in range(8)] + [("encoder_self", 0, 3), ("decoder_self", 2, 1)]
    mask = HeadMask.from_removed(whisper.layout, removed)
    kw = spoken.generate_kwargs(whisper, data, beams=1)
    with torch.inference_mode():
        with apply_mask(whisper, mask):
            masked = whisper.model.generate(features, **kw)
        pruned = prune_heads(whisper.model, mask).generate(features, **kw)
    assert torch.equal(masked, pruned)
    assert installed_hook_count(whisper.model) == 0


def test_prepared_folder_has_generation_and_feature_settings_and_is_kept(whisper):
    import json

    from pruning_core.zoo.whisper import prepare_whisper

    folder = catalog.get("whisper-base").folder()
    gen = json.loads((folder / "generation_config.json").read_text())
    assert gen["lang_to_id"]["<|en|>"] == 50259 and gen["task_to_id"] == {"translate": 50358, "transcribe": 50359}
    assert (gen["eos_token_id"], gen["decoder_start_token_id"], gen["no_timestamps_token_id"]) == (50257, 50258, 50363)
    features = json.loads((folder / "preprocessor_config.json").read_text())
    assert features["feature_size"] == 80 and features["sampling_rate"] == 16000 and features["chunk_length"] == 30
    report = prepare_whisper()
    assert report.skipped and report.manifest["source"]["model_bin"]["size"] == 145_217_532
    assert report.manifest["check"]["transcript"] == "This film is a wonderful story about friendship."
