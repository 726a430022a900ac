"""What Streamlit's script runner knows about the run in progress: whether it reruns a fragment alone, and
whether the user has sent something (a click, a page change, a closed tab) that this run has not taken yet.

A click made while a fragment runs does not interrupt it: Streamlit queues it until the run ends. A
fragment that waits for work therefore asks :func:`user_waiting` while it waits and ends its run at once
when it is True, so the click is taken without delay and the CPU is not spent redrawing a page nobody
is waiting for. Streamlit has no public call for this; :func:`user_waiting` reads the pinned version's
request state (``tests/app/test_reruns.py`` fails if that changes).
"""
from __future__ import annotations

from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequestType


def fragment_rerun() -> bool:
    """Whether this run reruns a fragment alone (a click inside it), not the whole page."""
    ctx = get_script_run_ctx()
    return ctx is not None and bool(ctx.fragment_ids_this_run)


def user_waiting() -> bool:
    """Whether a rerun or a stop is queued behind this run (False outside a Streamlit script run)."""
    ctx = get_script_run_ctx()
    requests = getattr(ctx, "script_requests", None)
    return requests is not None and requests._state != ScriptRequestType.CONTINUE
