"""The Attention page's words and predictions: an introduction that follows the model family (an
encoder classifier, a decoder-only language model, a translation model, a speech recogniser) and
the two models' answers shown whole, wrapped, with their probability as plain text (not as a
change badge)."""
from __future__ import annotations

import streamlit as st

from pruning_core.analysis.attention_maps import MAX_TOKENS

from app.core.text import md_escape

_COMMON = """
An attention head decides, for every token, how much to read from every other token: one row of
its **attention map** per token, summing to 1. Type a sentence (or pick one from the data) to see
every head's map, as the full model computes it and as the **pruned** model (your mask from the
Head map) does. A removed head contributes nothing to the pruned model: the thumbnails draw it in
grey, with a dotted frame, as it attended in the full model (what pruning took away); the bertviz
views of the pruned model leave it empty. The kept heads of later layers can attend differently
in the pruned model because their inputs changed."""

_FAMILY = {
    "classification": """
The model reads the whole sentence at once (each token reads every other), framed by the special
tokens `[CLS]` and `[SEP]` (`<s>`/`</s>` in some models). Many heads attend to `[CLS]`/`[SEP]` or
to the previous/next token: such heads are often the ones pruning removes first. Below, the two
predictions (the label and its probability) show whether the mask changed the model's answer.""",
    "language_model": """
The model is decoder-only: each token reads only itself and the tokens before it, so every map is
a lower triangle. Many heads put most of their weight on the first token (an "attention sink") or
on the previous token: such heads are often the ones pruning removes first. Below, the two
predictions (the most likely next token and its probability) show whether the mask changed the
model's answer.""",
    "translation": """
The encoder reads the source sentence (each token reads every other), the decoder writes the
translation one token at a time (each reads only the ones before it), and **cross-attention** lets
every output token read from the source. Below, the two translations show whether the mask changed
the model's answer.""",
    "asr": """
The sentence is spoken (espeak-ng) and the model transcribes the audio: the encoder's tokens are
short audio frames, the decoder writes the transcript one token at a time, and **cross-attention**
shows which stretch of audio each written token listens to. Below, the two transcripts show
whether the mask changed the model's answer.""",
}


def intro(task_type: str | None) -> str:
    """The Attention page's introduction for a model of ``task_type`` (the general part alone when
    the model is unknown, e.g. not loaded)."""
    return _COMMON + ("\n" + _FAMILY[task_type] if task_type in _FAMILY else "")


def show_predictions(run) -> None:
    """A speech model's input as a player, then the full and the pruned model's answer (an
    ``AttentionRun``) side by side, each shown whole (long transcripts and translations wrap instead
    of ending in "…"), its probability as plain text; a warning when they differ, and the run's notes."""
    mask = run.mask
    if run.audio is not None:             # a speech model heard the sentence: let the user hear it too
        st.audio(run.audio, sample_rate=run.audio_rate)
        st.caption(f"What the model heard: the sentence spoken by espeak-ng "
                   f"({run.audio.size / run.audio_rate:.1f} s).")
    left, right = st.columns(2)
    for col, name, pred in ((left, "all heads", run.dense_prediction),
                            (right, f"pruned ({mask.n_kept}/{mask.n_total} heads kept)", run.pruned_prediction)):
        top = max((p for _, p in pred.probabilities), default=None)
        with col.container(border=True):
            st.caption(f"Prediction, {name}")
            st.markdown(f"**{md_escape(pred.label)}**" if pred.label else "*(empty output)*")
            if top is not None:
                st.caption(f"probability {top:.3f}")
    if run.dense_prediction.label != run.pruned_prediction.label:
        st.warning("The mask changes the model's answer for this sentence.")
    notes = [f"The input was cut to its first {MAX_TOKENS} tokens."] if run.truncated else []
    st.caption(" ".join([*notes, *run.notes, f"Computed in {run.seconds:.2f} s."]))     # the library's own notes

