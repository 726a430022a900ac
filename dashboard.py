"""The headprune dashboard: `streamlit run dashboard.py` (or `headprune app`, `make run`).

This file is the shell: page config, session defaults (and a shared link's query parameters),
the navigation, and a sidebar summary. The page scripts live in app_pages/ (not Streamlit's
auto-discovered ``pages/`` folder: ``st.navigation`` below is the only page list); the logic they
call in app/ and pruning_core/.
"""
from pathlib import Path

import streamlit as st

from app import state, ui
from app.access import task_label
from app.text import md_code

ROOT = Path(__file__).resolve().parent
st.set_page_config(page_title="headprune", page_icon="✂️", layout="wide")
state.init()

# (file, title, icon), in menu order. The first page is served at "/", the others at their file
# name ("/head_map"), the path shared links use (app.share.APP_PAGES lists the same names).
PAGES = [
    ("app_pages/model_data.py", "Model & data", ":material/dataset:"),
    ("app_pages/head_map.py", "Head map", ":material/grid_on:"),
    ("app_pages/curves.py", "Curves", ":material/show_chart:"),
    ("app_pages/examples.py", "Per example", ":material/table_rows:"),
    ("app_pages/attention.py", "Attention", ":material/visibility:"),
    ("app_pages/speed.py", "Speed", ":material/speed:"),
    ("app_pages/share.py", "Share", ":material/share:"),
    ("app_pages/smp_compare.py", "SMP compare", ":material/compare_arrows:"),
    ("app_pages/dynamics.py", "Dynamics", ":material/timeline:"),
]

page = st.navigation([st.Page(str(ROOT / f), title=t, icon=i, url_path=Path(f).stem, default=(n == 0))
                      for n, (f, t, i) in enumerate(PAGES)])

ui.known_scorer()              # a link's unknown scorer is replaced (and said so) before anything shows it
with st.sidebar:                # values from a link or a file are shown through app.text, never as Markdown
    st.caption("**headprune** · which attention heads does this model need?")
    st.markdown(f"Model {md_code(state.model_spec())}  \nTask {md_code(task_label(state.task_spec()))}  \n"
                f"Score {md_code(state.scorer_name())}  \nEvaluated on {state.eval_limit()} examples")

state.push_query_params()      # before the page: a page that stops early still updates the link
page.run()
state.push_query_params()      # after: choices made by widgets during the run
