"""The dashboard's shell: session state (``state``), cached calls into pruning_core (``cache``),
the head-map figure (``headmap``), other figures (``charts``) and shared widgets (``ui``).

Dependencies point one way: ``pages -> app -> pruning_core``. Nothing here scores, masks or
prunes by itself; it calls pruning_core and caches the results.
"""


def _leave_pages_folder_mode() -> None:
    """Make a deep link to a freshly started server run through ``dashboard.py``.

    Streamlit 1.67 treats an app with a ``pages/`` folder as an old-style multipage app, which
    runs ``pages/<page>.py`` *without* the main script, until the first ``st.navigation`` call in
    the process turns that mode off. So the first visitor of a fresh server who opens a link to a
    page (a shared link) would get the page without the shell (no navigation, no link sync).
    Every page imports ``app`` first; if that mode is still on we turn it off and rerun, and
    ``dashboard.py`` then resolves the same page (its URL path is the file name without the
    number, the same name, hence the same page hash, the old mode uses).
    """
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    if PagesManager.uses_pages_directory and get_script_run_ctx() is not None:
        PagesManager.uses_pages_directory = False
        import streamlit as st
        st.rerun()


_leave_pages_folder_mode()
