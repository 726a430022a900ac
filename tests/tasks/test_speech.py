"""Speech data and the speech-recognition task (``asr``) on a tiny random Whisper: audio reading, resampling,
espeak-ng synthesis, listings, the cached movie-speech set, teacher-forced inputs, evaluation and scoring."""
import json
import shutil

import jiwer
import numpy as np
import pytest
import torch

from pruning_core.tasks.data import speech
from pruning_core.core.errors import CacheError, DataError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.scoring import ScoreConfig, get_scorer
from pruning_core.tasks import IGNORE, get_task
from pruning_core.tasks.speech import feature_extractor_for
from task_files import SPOKEN, listing_folder
from tiny import talkative_whisper, tiny_config, tiny_loaded

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")


def _tone(freq: float, rate: int, seconds: float = 0.5) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_resample_keeps_the_pitch_and_the_duration():
    out = speech.resample(_tone(1000.0, 22050), 22050, 16000)
    assert out.size == 8000
    peak = np.argmax(np.abs(np.fft.rfft(out))) * 16000 / out.size
    assert abs(peak - 1000.0) <= 2.0


def test_wav_round_trip_and_refusals(tmp_path):
    audio = _tone(440.0, 16000)
    path = tmp_path / "a.wav"
    path.write_bytes(speech.encode_wav(audio))
    back = speech.read_wav(path)
    assert back.shape == audio.shape and np.abs(back - audio).max() < 1e-3
    with pytest.raises(DataError, match="not a readable WAV"):
        speech.decode_wav(b"RIFFnonsense", "x.wav")
    with pytest.raises(DataError, match="Cannot read audio file"):
        speech.read_wav(tmp_path / "missing.wav")


def test_normalize_transcript():
    assert speech.normalize_transcript(" A well-made movie, I'd say -- 'picture shows.' ") == \
        "a well made movie i'd say picture shows"


@needs_espeak
def test_synthesize_speaks_at_16_khz():
    audio = speech.synthesize("the movie was good")
    assert audio.dtype == np.float32 and 0.8 < audio.size / speech.RATE < 5.0
    assert np.abs(audio).max() > 0.1


def test_listings_folder_jsonl_tsv(tmp_path):
    folder = listing_folder(tmp_path)
    rows = speech.load_listing(folder)
    assert [r["text"] for r in rows] == ["the movie was good", "it was a bad film"]
    jsonl = tmp_path / "list.jsonl"
    jsonl.write_text("".join(json.dumps({"audio": f"audio/{i}.wav", "text": t}) + "\n"
                             for i, t in enumerate(["a", "b"])))
    assert speech.load_listing(jsonl)[1]["audio"] == str(tmp_path / "audio" / "1.wav")
    tsv = tmp_path / "list.tsv"
    tsv.write_text("audio\ttext\naudio/0.wav\tthe movie\n")
    assert speech.load_listing(tsv) == [{"audio": str(tmp_path / "audio" / "0.wav"), "text": "the movie"}]
    tsv.write_text("path\ttranscript\nx.wav\ty\n")
    with pytest.raises(DataError, match="audio<TAB>text"):
        speech.load_listing(tsv)


def test_movie_speech_is_built_once_with_a_manifest(tmp_path, monkeypatch):
    monkeypatch.setattr(speech, "sentences", lambda split: [{"id": f"{split}-{i}", "text": t}
                                                            for i, t in enumerate(["good film", "bad plot"])])
    monkeypatch.setattr(speech, "synthesize", lambda text: _tone(300.0 + len(text), 16000, 0.2))
    folder = tmp_path / "movie-speech"
    rows = speech.load_split("test", folder=folder)
    assert [r["text"] for r in rows] == ["good film", "bad plot"] and speech.read_wav(rows[0]["audio"]).size == 3200
    manifest = speech.read_manifest(folder)
    assert set(manifest["files"]) == {"validation.jsonl", "test.jsonl", "validation/0000.wav", "validation/0001.wav",
                                      "test/0000.wav", "test/0001.wav"}
    assert speech.load_split("test", limit=1, folder=folder)[0]["id"] == "test-0"
    (folder / "test.jsonl").write_text("{}\n")
    with pytest.raises(CacheError, match="differs from its manifest"):
        speech.load_split("test", folder=folder)
    with pytest.raises(DataError, match="no split 'train'"):
        speech.load_split("train", folder=folder)


# -- the task on a tiny random Whisper ----------------------------------------------------------------------

def test_feature_extractor_covers_the_encoder_positions():
    config = tiny_config("whisper")
    extractor = feature_extractor_for(config)
    mel = extractor(np.zeros(4000, np.float32), sampling_rate=16000, return_tensors="pt").input_features
    assert mel.shape == (1, 8, 100)


@pytest.fixture()
def asr(tmp_path):
    lm = tiny_loaded("whisper", tmp_path)
    task = get_task(f"speech:{listing_folder(tmp_path)}")
    return lm, task, task.encode(lm, "test")


def test_teacher_forced_inputs_are_real_ids_and_labels_skip_the_prompt(asr):
    lm, task, data = asr
    assert task.task_type == "asr" and task.metric_name == "wer"
    prompt = list(data.specials["prompt"])
    assert prompt == [5]                                            # a model without language tokens: start only
    text_ids = lm.tokenizer(" the movie was good", add_special_tokens=False)["input_ids"]
    feature = data.features[0]
    assert feature["decoder_input_ids"] == prompt + text_ids
    assert feature["labels"] == [IGNORE] * (len(prompt) - 1) + text_ids + [6]
    batch = next(data.batches(2))
    assert batch.inputs["input_features"].shape == (2, 8, 100)
    assert (batch.inputs["decoder_input_ids"] >= 0).all()           # padding is a real id, never -100
    assert batch.token_masks["encoder_self"].shape == (2, 50)
    assert batch.token_masks["cross"].shape == batch.inputs["decoder_input_ids"].shape


@pytest.mark.heavy
def test_evaluate_gives_wer_with_interval_and_bleu(asr):
    lm, task, data = asr
    result = task.evaluate(lm, data, batch_size=2)
    assert result.metric_name == "wer" and result.interval is not None
    assert result.metric == pytest.approx(jiwer.wer(list(SPOKEN), list(result.predictions)))   # word edits / 9 words
    assert result.n_examples == 2 and len(result.per_example) == 2
    assert "bleu_transcript_vs_spoken_text" in result.extra
    assert result.extra["target_tokens"] == (4 + 1) + (5 + 1)                 # words + end-of-text
    assert result.loss > 0
    mask = HeadMask.from_removed(lm.layout, [("cross", 0, h) for h in range(4)])
    masked = task.evaluate(lm, data, mask, batch_size=1)
    assert masked.loss != pytest.approx(result.loss)
    assert installed_hook_count(lm.model) == 0


@pytest.mark.heavy
def test_the_loss_reads_the_transcript_positions_through_proj_out_once_asked(asr):
    """Whisper's loss keeps the hidden states of the transcript positions and projects them by ``proj_out`` when the
    losses are asked for (after the metric, ``Task.metric_first``): each utterance's loss is the whole
    ``[B, T, V]`` logits' (float32 sums in another order)."""
    from pruning_core.modeling.inference import packed_logits
    from pruning_core.tasks.batching import label_losses

    lm, task, data = asr
    assert packed_logits.output_layer(lm.model)[0] is lm.model.proj_out.weight
    result = task.evaluate(lm, data, batch_size=2)
    whole = {}
    with torch.no_grad():
        for b in data.batches(2):
            whole.update(zip(b.index.tolist(), label_losses(lm.model(**b.inputs).logits, b.labels).tolist()))
    assert list(result.example_losses) == pytest.approx([whole[j] for j in range(data.n_examples)], rel=1e-5)


@pytest.mark.heavy
def test_beams_are_accepted_for_speech(asr):
    lm, task, data = asr
    assert task.evaluate(lm, data, beams=2).extra["beams"] == 2


def test_gradient_importance_covers_the_three_kinds(asr):
    lm, task, data = asr
    scores = get_scorer("gradient").score(lm, task, ScoreConfig(split="test", batch_size=2)).scores
    for kind in ("encoder_self", "decoder_self", "cross"):
        rows = scores.kinds[kind]
        assert len(rows) == 2 and all(len(r) == 4 for r in rows)
        assert all(v >= 0 for r in rows for v in r) and any(v > 0 for r in rows for v in r)


def test_speech_task_refuses_a_text_model(tmp_path):
    bert = tiny_loaded("bert", tmp_path)
    task = get_task(f"speech:{listing_folder(tmp_path)}")
    with pytest.raises(DataError, match="asr task"):
        task.encode(bert, "test")


@pytest.mark.heavy
def test_precomputed_encoder_outputs_give_the_same_result_and_refuse_encoder_masks(asr):
    lm, task, data = asr
    encoded = task.with_encoder_outputs(lm, data)
    mask = HeadMask.from_removed(lm.layout, [("cross", 1, 2), ("decoder_self", 0, 0)])
    a, b = task.evaluate(lm, data, mask, batch_size=2), task.evaluate(lm, encoded, mask, batch_size=2)
    assert a.per_example == b.per_example and a.loss == pytest.approx(b.loss, abs=1e-5)
    with pytest.raises(DataError, match="removes encoder_self heads"):
        task.evaluate(lm, encoded, HeadMask.from_removed(lm.layout, [("encoder_self", 0, 1)]))


@pytest.mark.heavy
@needs_espeak
def test_attention_maps_of_a_spoken_sentence(tmp_path):
    from pruning_core.analysis.attention_maps import run_attention

    lm = tiny_loaded("whisper", tmp_path)
    mask = HeadMask.from_removed(lm.layout, [("cross", 0, 1), ("encoder_self", 1, 3)])
    run_attention(lm, "good", None)           # transformers keeps hooks of its own once maps were asked for
    hooks = installed_hook_count(lm.model)
    run = run_attention(lm, "the movie was good", mask)
    assert set(run.kinds) == {"encoder_self", "decoder_self", "cross"}
    queries, keys = run.tokens_for("cross")
    assert keys[0] == "0.00s" and len(keys) <= 48 and len(queries) == len(run.decoder_tokens)
    assert run.dense["cross"][0].shape == (4, len(queries), len(keys))
    assert run.dense["encoder_self"][1].shape == (4, len(keys), len(keys))
    assert np.all(run.pruned["cross"][0][1] == 0) and np.any(run.dense["cross"][0][1] > 0)
    assert np.all(run.dense["cross"][0].sum(-1) <= 1.0 + 1e-4)
    assert installed_hook_count(lm.model) == hooks                # none of the mask's left behind


def test_a_pruned_decoder_that_emits_timestamps_still_transcribes(asr):
    """A pruned Whisper can emit timestamp tokens although the prompt asks for none; transformers' generate
    then loops over "segments" and, decoding from encoder outputs, fails with a TypeError. Timestamps are
    forbidden instead: the transcript is text."""
    lm, task, _ = asr
    data = task.encode(lm, "test", max_length=16)          # room for the no-timestamps token generate adds
    first = 20                                              # ids 20.. play the timestamps of this tiny vocabulary
    lm.model.generation_config.no_timestamps_token_id = first - 1
    head = lm.model.get_output_embeddings()

    def favour_timestamps(module, inputs, logits):
        logits = logits.clone()
        logits[..., first] += 1e4                           # a decoder that always says "<|0.00|>"
        return logits

    handle = head.register_forward_hook(favour_timestamps)
    try:
        result = task.evaluate(lm, data, batch_size=2)
    finally:
        handle.remove()
    assert result.n_examples == 2 and result.metric == pytest.approx(jiwer.wer(list(SPOKEN), list(result.predictions)))
    ids = lm.tokenizer.convert_tokens_to_ids(lm.tokenizer.convert_ids_to_tokens(first))
    assert all(lm.tokenizer.decode([ids]).strip() not in p for p in result.predictions if p)


@pytest.mark.parametrize("batch_size", [1, 2])
def test_greedy_transcripts_equal_generates_and_the_bound_is_recorded(tmp_path, monkeypatch, batch_size):
    """The task's greedy decoding (step by step from the loss pass's encoder output and cross-attention keys/values,
    within the audio's bound) gives the transcripts, losses and WER of ``generate`` as the task asks for them, and
    the result says how it decoded."""
    from pruning_core.tasks import speech as speech_task

    lm = talkative_whisper(tmp_path)
    task = get_task(f"speech:{listing_folder(tmp_path, ('the movie was good', 'it was a bad film', 'fun'))}")
    data = task.encode(lm, "test", max_length=12)
    mask = HeadMask.from_removed(lm.layout, [("encoder_self", 1, 1), ("decoder_self", 1, 2), ("cross", 1, 0)])
    for m in (None, mask):
        greedy = task.evaluate(lm, data, m, batch_size=batch_size)
        with monkeypatch.context() as patch:
            patch.setattr(speech_task, "greedy_rules", lambda *a, **k: None)
            generated = task.evaluate(lm, data, m, batch_size=batch_size)
        assert greedy.predictions == generated.predictions and greedy.metric == generated.metric
        assert greedy.example_losses == generated.example_losses
        assert greedy.extra["decoding"] == {"method": "greedy", "bound": speech_task.BOUND.describe()}
        assert generated.extra["decoding"]["bound"] is None
    assert installed_hook_count(lm.model) == 0
