"""The headprune dashboard: `streamlit run dashboard.py` (or `headprune app`, `make run`).

This file is the shell: page config, session defaults (and a shared link's query parameters),
the navigation, and a sidebar summary. The page scripts live in app_pages/ (not Streamlit's
auto-discovered ``pages/`` folder: ``st.navigation`` below lists ``app.core.pages``, the one page list); the logic they
call in app/ and pruning_core/.
"""
import os

# Before torch loads (OpenMP reads it then): torch's OpenMP threads that wait for work sleep instead of
# spinning. Spinning helps a lone forward pass by microseconds, but on a busy machine (a class's browsers,
# other jobs) a spinning thread takes the core the thread it waits for needs: eight evaluations of the
# default then took 3x the wall time and 2-3x the CPU seconds (OMP_WAIT_POLICY=PASSIVE, issue 17).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from pathlib import Path  # noqa: E402

import streamlit as st  # noqa: E402

from app.core.session import state  # noqa: E402
from app.sidebar import pickers  # noqa: E402
from app.model import cache  # noqa: E402
from app.core.progress_text import count_text  # noqa: E402
from app.sidebar import warm  # noqa: E402
from app.core.access import task_label  # noqa: E402
from app.core.pages import PAGES  # noqa: E402
from app.core.text import md_code  # noqa: E402
from app.headmap import kv_mode  # noqa: E402

HEAD_MAP = "head_map"           # the Head map's url path: its KV mode has no pruning scorer

ROOT = Path(__file__).resolve().parent
st.set_page_config(page_title="headprune", page_icon="✂️", layout="wide")
state.init()

warm.start_once(*state.defaults())     # once per server: new sessions' model scored ahead if prepare did not

page = st.navigation([st.Page(str(ROOT / p.file), title=p.title, icon=p.icon, url_path=p.url_path, default=(n == 0))
                      for n, p in enumerate(PAGES)])      # app.core.pages: the one page list

pickers.known_model()               # a link's model that cannot be loaded falls back to the default (said so)
pickers.known_scorer()              # a link's unknown scorer is replaced (and said so) before anything shows it
with st.sidebar:                # values from a link or a file are shown through app.core.text, never as Markdown
    st.caption("**headprune** · which attention heads does this model need?")
    n = pickers.selection().eval_size
    unit = cache.example_unit(state.model_spec(), state.task_spec())   # cached; a fallback if unreadable
    score = "" if page.url_path == HEAD_MAP and kv_mode.scorer_hidden() else f"Score {md_code(state.scorer_name())}  \n"
    st.markdown(f"Model {md_code(state.model_spec())}  \nTask {md_code(task_label(state.task_spec()))}  \n"
                f"{score}Evaluated on {count_text(n, unit)}")

state.push_query_params(page.url_path)     # before the page: a page that stops early still updates the link
page.run()
state.push_query_params(page.url_path)     # after: choices made by widgets during the run
