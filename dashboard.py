"""The headprune dashboard: `streamlit run dashboard.py` (or `headprune app`, `make run`).

This file is the shell: page config, session defaults (and a shared link's query parameters),
the navigation, and a sidebar summary. The page scripts live in app_pages/ (not Streamlit's
auto-discovered ``pages/`` folder: ``st.navigation`` below lists ``app.pages``, the one page list); the logic they
call in app/ and pruning_core/.
"""
from pathlib import Path

import streamlit as st

from app import state, ui, workload
from app.access import task_label
from app.pages import PAGES
from app.text import md_code

ROOT = Path(__file__).resolve().parent
st.set_page_config(page_title="headprune", page_icon="✂️", layout="wide")
state.init()

page = st.navigation([st.Page(str(ROOT / p.file), title=p.title, icon=p.icon, url_path=p.url_path, default=(n == 0))
                      for n, p in enumerate(PAGES)])      # app.pages: the one page list

ui.known_scorer()              # a link's unknown scorer is replaced (and said so) before anything shows it
with st.sidebar:                # values from a link or a file are shown through app.text, never as Markdown
    st.caption("**headprune** · which attention heads does this model need?")
    own, unit = workload.own_size(state.model_spec(), state.task_spec())     # cached; a fallback if unreadable
    n = state.eval_limit() or own
    st.markdown(f"Model {md_code(state.model_spec())}  \nTask {md_code(task_label(state.task_spec()))}  \n"
                f"Score {md_code(state.scorer_name())}  \nEvaluated on {n} {unit}{'s' if n != 1 else ''}")

state.push_query_params(page.url_path)     # before the page: a page that stops early still updates the link
page.run()
state.push_query_params(page.url_path)     # after: choices made by widgets during the run
