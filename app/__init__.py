"""The dashboard's app layer, between the page scripts (``app_pages/``) and ``pruning_core``.

Streamlit-bound: ``state`` (session-state keys and URL), ``cache`` (every cached call into
pruning_core), ``work`` (a slow call and when it starts, with progress and Cancel), ``mask_state``
(the session's mask and its undo/redo), ``notices``, ``session_results``, ``ui`` (shared widgets),
``headmap_ui`` (the clickable head map), ``latency_ui`` (the Head map's per-session latency probe),
``share_ui`` (the Share page's session glue). Pure (no Streamlit): ``pages`` (the one page list),
``analysis``, ``share``, ``report``, ``charts``, ``headmap``, ``speed``, ``attention``, ``webassets``,
``mask_history``. See docs/DESIGN.md.

Dependencies point one way: ``app_pages -> app -> pruning_core``. Nothing here scores, masks or
prunes by itself; it calls pruning_core and caches the results.
"""
