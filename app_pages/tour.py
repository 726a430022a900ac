"""Tour: a guided walk for a class, one step at a time, each a link that opens its state."""
import streamlit as st

from app.core import ui
from app.core.text import md_escape
from app.core.session import state
from app.tour import steps, ui as tour_ui

ui.page_intro("Tour", "A walk through what attention-head pruning shows, one step at a time, for a class.")
with st.expander("How the tour works"):
    st.markdown("""
Each step has one paragraph, a prepared state (model, task and mask, computed here and made this
session's), **one thing to click**, and a **link**: project the step, and students who open the link
see the same state. The first visit to a step computes it (a progress bar: about a minute for the
default model on 2 CPU cores, several for SmolLM2 or the translation model); after that every session
gets it from the server's cache at once, so a teacher clicks through the tour once before class. A
step replaces your mask (the Head map's **Undo** brings yours back).""")

models = steps.tour_models(*state.defaults())
model = tour_ui.model_picker(models)
current = steps.step(state.tour_step())
state.set_tour_step(current.name)
index = steps.STEPS.index(current)
heading = st.empty()
heading.subheader(f"Step {index + 1} of {len(steps.STEPS)} · {current.title}")
if told := tour_ui.show_step(current, model, models):
    heading.subheader(f"Step {index + 1} of {len(steps.STEPS)} · {md_escape(told)}")
tour_ui.navigation(current)
