"""Speech data: audio read from WAV files or synthesized from text, at 16 kHz mono float32.

Examples are ``{"audio": WAV path, "text": what is spoken}``. :func:`synthesize` has ``espeak-ng`` read a text
(English, 120 words a minute, slowed because Whisper-base mishears its default rate) and resamples it to
16 kHz (:func:`resample`, numpy only). :func:`load_listing` reads a folder of ``NAME.wav`` + ``NAME.txt``, a
JSONL or a TSV listing. **movie-speech**, the embedded offline set: the movie-sentiment validation and test
snippets of :data:`MIN_WORDS`-:data:`MAX_WORDS` words, the first :data:`PER_SPLIT` of each, synthesized once
into ``headprune_home()/data/movie-speech/`` (staged, with a manifest of SHA-256s written last) by
:func:`load_split` on first use.
"""
from __future__ import annotations

import io
import json
import re
import shutil
import struct
import subprocess
import time
import wave
from pathlib import Path

import numpy as np

from pruning_core.core.io import storage
from pruning_core.core.io.codec import SPEECH_FORMAT
from pruning_core.core.errors import CacheError, DataError
from pruning_core.core.progress import ProgressCallback, report

RATE = 16_000
ESPEAK = "espeak-ng"
VOICE, SPEED, GAP = "en", 120, 2
NAME = "movie-speech"
SPLITS: tuple[str, ...] = ("validation", "test")
PER_SPLIT = 200
MIN_WORDS, MAX_WORDS = 5, 25               # 25 words at 120 wpm fit Whisper's 30 s window with room


# -- audio -------------------------------------------------------------------------------------------

def resample(audio: np.ndarray, rate_in: int, rate_out: int = RATE) -> np.ndarray:
    """``audio`` [samples] at ``rate_in`` -> [samples * rate_out / rate_in] at ``rate_out`` (FFT, band-limited)."""
    if rate_in == rate_out or audio.size == 0:
        return audio.astype(np.float32)
    n_out = int(round(audio.size * rate_out / rate_in))
    spectrum = np.fft.rfft(audio.astype(np.float64))
    keep = min(spectrum.size, n_out // 2 + 1)
    out = np.fft.irfft(spectrum[:keep], n_out) * (n_out / audio.size)
    return out.astype(np.float32)


CONVERT = "e.g. `ffmpeg -i IN -ar 16000 -ac 1 -sample_fmt s16 OUT.wav`"


def decode_wav(data: bytes, where: str) -> np.ndarray:
    """A 16-bit PCM WAV file's bytes -> mono float32 [samples] in [-1, 1] at 16 kHz."""
    try:
        with wave.open(io.BytesIO(data)) as w:
            rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
            frames = w.readframes(w.getnframes())
    except (wave.Error, EOFError, RuntimeError, ValueError, struct.error) as exc:   # RuntimeError: a chunk past the end
        raise DataError(f"{where} is not a readable WAV file ({str(exc)[:80] or type(exc).__name__}); give 16-bit "
                        f"PCM WAV audio ({CONVERT}).") from None
    if width != 2:
        raise DataError(f"{where} has {8 * width}-bit samples; give 16-bit PCM WAV audio ({CONVERT}).")
    if channels < 1 or not 1_000 <= rate <= 384_000 or len(frames) % (2 * channels):
        raise DataError(f"{where} has a broken header ({channels} channels at {rate} Hz, {len(frames)} bytes of "
                        f"samples); give 16-bit PCM WAV audio ({CONVERT}).")
    pcm = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    if channels > 1:
        pcm = pcm.reshape(-1, channels).mean(axis=1)
    return resample(pcm, rate)


def read_wav(path: str | Path) -> np.ndarray:
    """Mono float32 [samples] at 16 kHz from a 16-bit PCM WAV file (any rate, any channels)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"Cannot read audio file {str(path)!r}: {exc.strerror}. Check the path.") from None
    return decode_wav(data, str(path))


def encode_wav(audio: np.ndarray, rate: int = RATE) -> bytes:
    """Float audio [samples] in [-1, 1] -> the bytes of a mono 16-bit PCM WAV file."""
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return buffer.getvalue()


def synthesize(text: str, voice: str = VOICE, speed: int = SPEED, gap: int = GAP) -> np.ndarray:
    """``text`` spoken by espeak-ng -> mono float32 [samples] at 16 kHz."""
    if shutil.which(ESPEAK) is None:
        raise DataError("espeak-ng is not installed; it synthesizes the offline speech. Install it "
                        "(`apt-get install espeak-ng`) or give recorded audio files instead.")
    proc = subprocess.run([ESPEAK, "-v", voice, "-s", str(speed), "-g", str(gap), "--stdout", text],
                          capture_output=True, timeout=120)
    if proc.returncode != 0 or not proc.stdout:
        raise DataError(f"espeak-ng failed on {text[:40]!r}: {proc.stderr.decode(errors='replace').strip()[:200]}")
    return decode_wav(_fix_stream_header(proc.stdout), "espeak-ng output")


def _fix_stream_header(data: bytes) -> bytes:
    """espeak-ng writes a streaming WAV to stdout (sizes 0x7fffffff); set the RIFF and data sizes."""
    if data[:4] != b"RIFF":
        return data
    fixed = bytearray(data)
    fixed[4:8] = (len(data) - 8).to_bytes(4, "little")
    at = fixed.find(b"data", 12)
    if at >= 0:
        fixed[at + 4:at + 8] = (len(data) - at - 8).to_bytes(4, "little")
    return bytes(fixed)


def normalize_transcript(text: str) -> str:
    """Lower case, punctuation (hyphens included) removed but in-word apostrophes kept, single spaces: what
    WER and BLEU of a transcript compare ("A well-made movie, I'd say." -> "a well made movie i'd say")."""
    text = re.sub(r"[^\w\s']", " ", text.lower())
    text = re.sub(r"(?<!\w)'|'(?!\w)", " ", text)
    return " ".join(text.split())


# -- listings of audio files -------------------------------------------------------------------------

LISTING_HELP = ("give a folder of NAME.wav + NAME.txt files, a .jsonl file of {\"audio\", \"text\"} lines or a .tsv "
                "file with the header line 'audio<TAB>text'")


def load_listing(path: str | Path) -> list[dict]:
    """``[{"audio": absolute wav path, "text": transcript}]`` from a folder, a JSONL or a TSV listing; every
    audio file named must exist (a DataError naming the listing's line otherwise)."""
    path = Path(path).expanduser()
    if path.is_dir():
        rows = [{"audio": str(w), "text": _read_text(w.with_suffix(".txt")).strip()}
                for w in sorted(path.glob("*.wav")) if w.with_suffix(".txt").is_file()]
        if not rows:
            raise DataError(f"Folder {str(path)!r} has no NAME.wav with a NAME.txt transcript beside it; {LISTING_HELP}.")
        return rows
    where = f"Speech listing {str(path)!r}"
    if not path.is_file():
        raise DataError(f"{where} does not exist; {LISTING_HELP}.")
    lines = _read_text(path).splitlines()
    if path.suffix.lower() == ".jsonl":
        rows = [(i + 1, _json_line(line, f"{where} line {i + 1}")) for i, line in enumerate(lines) if line.strip()]
    elif path.suffix.lower() == ".tsv":
        header = lines[0].split("\t") if lines else []
        if header[:2] != ["audio", "text"]:
            raise DataError(f"{where} must start with the header line 'audio<TAB>text' (got {str(header[:2])[:60]}); "
                            "add it.")
        rows = [(i + 2, dict(zip(("audio", "text"), line.split("\t", 1))))
                for i, line in enumerate(lines[1:]) if line.strip()]
    else:
        raise DataError(f"{where}: a speech listing is a folder, a .jsonl or a .tsv file; {LISTING_HELP}.")
    if not rows:
        raise DataError(f"{where} lists no audio; {LISTING_HELP}.")
    return [_listed(row, f"{where} line {n}", path.parent) for n, row in rows]


def _listed(row, where: str, base: Path) -> dict:
    """One listing row checked: a text, and an audio path (relative to the listing) of a file that exists."""
    if not isinstance(row, dict) or not isinstance(row.get("audio"), str) or "text" not in row:
        raise DataError(f"{where} needs an 'audio' path and a 'text' transcript; fix that line.")
    text = row["text"]
    if not isinstance(text, (str, int, float)) or isinstance(text, bool):
        raise DataError(f"{where} has a transcript that is not text; fix that line.")
    audio = Path(row["audio"]).expanduser() if row["audio"].strip() and "\x00" not in row["audio"] else None
    audio = None if audio is None else audio if audio.is_absolute() else base / audio
    if audio is None or not audio.is_file():
        raise DataError(f"{where} names audio {row['audio'][:80]!r}, which is not a file; fix the path (relative "
                        "paths start at the listing's folder).")
    return {"audio": str(audio), "text": str(text).strip()}


def _json_line(line: str, where: str):
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{where} is not valid JSON ({str(exc)[:100]}); fix that line.") from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise DataError(f"{str(path)!r} cannot be read as UTF-8 text ({str(exc)[:100]}); save it as UTF-8 and "
                        "check the path.") from None


# -- the embedded movie-speech set -------------------------------------------------------------------

def data_dir() -> Path:
    from pruning_core.modeling.sources.catalog import headprune_home
    return headprune_home() / "data" / NAME


def sentences(split: str) -> list[dict]:
    """The movie-sentiment snippets of ``split`` that are spoken (:data:`MIN_WORDS`-:data:`MAX_WORDS` words)."""
    from pruning_core.tasks.data import movie_sentiment

    rows = [e for e in movie_sentiment.load_split(split) if MIN_WORDS <= len(e["text"].split()) <= MAX_WORDS]
    return [{"id": e["id"], "text": e["text"]} for e in rows[:PER_SPLIT]]


def build(folder: Path | None = None, progress: ProgressCallback | None = None) -> dict:
    """Synthesize every split into ``folder`` (staged) and write the manifest last; returns it."""
    folder = folder or data_dir()
    folder.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    todo = {split: sentences(split) for split in SPLITS}
    total, done = sum(len(v) for v in todo.values()), 0
    with storage.staged_folder(folder) as tmp:
        files: dict[str, str] = {}
        for split, rows in todo.items():
            listing = []
            for i, row in enumerate(rows):
                name = f"{split}/{i:04d}.wav"
                data = encode_wav(synthesize(row["text"]))
                storage.write_bytes(tmp / name, data)
                files[name] = storage.sha256_bytes(data)
                listing.append({"id": row["id"], "audio": name, "text": row["text"]})
                done += 1
                report(progress, "speech:synthesize", done, total, split)
            files[f"{split}.jsonl"], _ = storage.write_jsonl(tmp / f"{split}.jsonl", listing)
        manifest = storage.write_manifest(tmp / "manifest.json", storage.Manifest(SPEECH_FORMAT, {
            "name": NAME, "sizes": {s: len(v) for s, v in todo.items()},
            "source": "movie-sentiment snippets (validation, test) of "
                      f"{MIN_WORDS}-{MAX_WORDS} words, first {PER_SPLIT} per split",
            "speech": f"{ESPEAK} -v {VOICE} -s {SPEED} -g {GAP}, resampled to {RATE} Hz, 16-bit PCM",
            "espeak_version": _espeak_version(), "seconds": round(time.perf_counter() - start, 1),
        }, files=files))
    return manifest


def _espeak_version() -> str:
    try:
        return subprocess.run([ESPEAK, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return "unknown"


def read_manifest(folder: Path | None = None) -> dict | None:
    return storage.read_manifest((folder or data_dir()) / "manifest.json", SPEECH_FORMAT,
                                 "Delete the folder; it is rebuilt on next use.", require=("files",))


def load_split(split: str, limit: int | None = None, folder: Path | None = None,
               progress: ProgressCallback | None = None) -> list[dict]:
    """``[{"audio": wav path, "text": ..., "id": ...}]`` of ``split`` of movie-speech (built on first use)."""
    if split not in SPLITS:
        raise DataError(f"movie-speech has no split {split!r}; its splits: {', '.join(SPLITS)}.")
    folder = folder or data_dir()
    manifest = read_manifest(folder)
    if manifest is None:
        manifest = build(folder, progress)
    listing = folder / f"{split}.jsonl"
    if storage.sha256_file(listing) != manifest["files"].get(f"{split}.jsonl"):
        raise CacheError(f"{listing} differs from its manifest; delete {folder} and it is rebuilt on next use.")
    rows = [json.loads(line) for line in listing.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = rows[:limit] if limit is not None else rows
    return [{"id": r["id"], "audio": str(folder / r["audio"]), "text": r["text"]} for r in rows]
