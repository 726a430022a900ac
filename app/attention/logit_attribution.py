"""The Attention page's logit attribution view, for decoder language models: which tokens one head pushes the
model towards at the answer position (direct logit attribution:
:mod:`pruning_core.analysis.logit_attribution`), and the model's top next tokens with all heads and with that
head removed, on the page's sentence or on a long-context example (at the position where the model's greedy
continuation starts the answer, that token followed too), so a retrieval head is seen copying the needle. Computed once per model, head and input
(:func:`app.attention.cache.head_attribution`)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.attention import cache
from app.core.session import state
from app.core.text import md_escape
from app.runtime.work import Work
from pruning_core.analysis.logit_attribution import CONVENTION, HeadAttribution
from pruning_core.tasks.data import ruler
from pruning_core.tasks.long_context import DEFAULT_CONTEXT

TAB = "Logit attribution"
SENTENCE, EXAMPLE = "sentence", "example"


def offered(arch) -> bool:
    """Whether the model of ``arch`` is a decoder language model (the view reads its next-token logits)."""
    return arch.task_type == "language_model" and "decoder_self" in arch.layout.kinds


def tabs(arch) -> list[str]:
    """The view's tab name when :func:`offered`, else none."""
    return [TAB] if offered(arch) else []


def _key(name: str) -> str:
    return state.widget_key("attention", f"dla_{name}")


def show(spec: str, arch, text: str) -> None:
    """Pick a head and an input, then the head's promoted tokens and the next tokens before vs after removing it."""
    rows = arch.layout.kinds["decoder_self"]
    c1, c2, c3 = st.columns([1, 1, 3])
    layer = c1.selectbox("Layer", range(len(rows)), key=_key("layer"))
    head = c2.selectbox("Head", range(rows[layer]), key=_key("head"))
    source = c3.radio("Input", [SENTENCE, EXAMPLE], horizontal=True, key=_key("source"),
                      format_func={SENTENCE: "the sentence above",
                                   EXAMPLE: f"a long-context example (up to {DEFAULT_CONTEXT:,} tokens)"}.get)
    example = None
    if source == EXAMPLE:
        c4, c5 = st.columns([3, 2])
        kind = c4.selectbox("Long-context task", list(ruler.RULER_KINDS), key=_key("task"))
        index = c5.selectbox("Example", range(cache.EXAMPLES), key=_key("example"),
                             format_func=lambda i: f"test example {i}")
        example = (kind, DEFAULT_CONTEXT, index)
    result = Work("attribution", f"Attributing layer {layer}, head {head}'s output to tokens", cache.head_attribution,
                  (spec, layer, head, None if example else text, example), progress=False).show()
    if result is None:
        return
    draw(result)


def token_text(token: str) -> str:
    """A token as text with its spaces visible: ``' Paris'``."""
    return repr(token)


def table(result: HeadAttribution) -> pd.DataFrame:
    """The model's top next tokens with all heads and with the head removed, side by side (probabilities)."""
    return pd.DataFrame({"Rank": range(1, len(result.before) + 1),
                         "All heads": [token_text(t.token) for t in result.before],
                         "Probability, all heads": [round(t.value, 4) for t in result.before],
                         f"Layer {result.layer}, head {result.head} removed": [token_text(t.token)
                                                                               for t in result.after],
                         "Probability, head removed": [round(t.value, 4) for t in result.after]})


def figure(result: HeadAttribution) -> go.Figure:
    """The head's top promoted tokens as horizontal bars of their direct logit (largest on top)."""
    tokens = [token_text(t.token) for t in result.promoted][::-1]
    values = [t.value for t in result.promoted][::-1]
    fig = go.Figure(go.Bar(x=values, y=tokens, orientation="h", marker_color="#00204c",
                           hovertemplate="%{y}: direct logit %{x:.3f}<extra></extra>"))
    fig.update_layout(title=dict(text=f"Tokens layer {result.layer}, head {result.head} promotes", font=dict(size=14)),
                      xaxis_title="direct logit", height=80 + 26 * len(tokens), margin=dict(l=120, r=20, t=50, b=40))
    return fig


def draw(result: HeadAttribution) -> None:
    # the chart above the table, each the page's width: beside each other at 1366 px the table lost its last
    # column, the one the view is about ("Probability, head removed")
    st.plotly_chart(figure(result), config={"displayModeBar": False},
                    alt=f"Direct logit of the tokens layer {result.layer}, head {result.head} promotes most")
    st.dataframe(table(result), hide_index=True, width="stretch")
    notes = [f"At the last of {result.n_tokens:,} tokens (where the next token is predicted)."]
    step = result.answer_step
    if step is not None and step["found"]:
        added = result.n_tokens - step["prompt_tokens"]
        notes = [f"At the position that predicts the answer: the {step['prompt_tokens']:,}-token prompt (of an "
                 f"example built for a context of at most {DEFAULT_CONTEXT:,} tokens), then "
                 + (f"the model's own greedy {md_escape(token_text(step['continuation']))} ({added} token"
                    f"{'s' if added != 1 else ''})." if added else "nothing: the answer comes first.")]
    elif step is not None:
        notes = [f"At the prompt's last token: the model's greedy continuation "
                 f"{md_escape(token_text(step['continuation']))} does not reach the answer."]
    notes.append(f"Direct logit: the head's output through its slice of the output projection, the {CONVENTION}, "
                 "and the unembedding.")
    if result.target is not None:
        t = result.target
        notes.append(f"The answer's first token {md_escape(token_text(t['token']))}: direct logit "
                     f"{t['direct_logit']:.3f} (rank {t['direct_rank'] + 1:,} of the vocabulary), probability "
                     f"{t['p_before']:.4f} with all heads, {t['p_after']:.4f} without this head.")
    st.caption(" ".join(notes))
