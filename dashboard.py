"""The headprune dashboard: `streamlit run dashboard.py` (or `headprune app`, `make run`).

This file is the shell: page config, session defaults (and a shared link's query parameters),
the navigation, and a sidebar summary. The pages live in pages/; the logic they call in app/
and pruning_core/.
"""
from pathlib import Path

import streamlit as st

from app import state

ROOT = Path(__file__).resolve().parent
st.set_page_config(page_title="headprune", page_icon="✂️", layout="wide")
state.init()

# (file, title, icon); the optional pages appear once their file exists. The first page is served
# at "/", the others at their file name without the number ("/head_map"): the name Streamlit's old
# pages-folder mode derives too, so a link opened on a fresh server resolves to the same page when
# app/__init__.py hands that mode over to this navigation.
PAGES = [
    ("pages/1_model_data.py", "Model & data", ":material/dataset:"),
    ("pages/2_head_map.py", "Head map", ":material/grid_on:"),
    ("pages/3_curves.py", "Curves", ":material/show_chart:"),
    ("pages/4_attention.py", "Attention", ":material/visibility:"),
    ("pages/5_speed.py", "Speed", ":material/speed:"),
    ("pages/6_share.py", "Share", ":material/share:"),
    ("pages/7_smp_compare.py", "SMP compare", ":material/compare_arrows:"),
]


def url_path(file: str) -> str:
    return Path(file).stem.split("_", 1)[1]


page = st.navigation([st.Page(str(ROOT / f), title=t, icon=i, url_path=url_path(f), default=(n == 0))
                      for n, (f, t, i) in enumerate(PAGES) if (ROOT / f).is_file()])

with st.sidebar:
    st.caption("**headprune** · which attention heads does this model need?")
    st.markdown(f"Model `{state.model_spec()}`  \nTask `{state.task_spec()}`  \nScore `{state.scorer_name()}`  \n"
                f"Evaluated on {state.eval_limit()} examples")

state.push_query_params()      # before the page: a page that stops early still updates the link
page.run()
state.push_query_params()      # after: choices made by widgets during the run
