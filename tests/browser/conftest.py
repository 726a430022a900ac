"""The dashboard server the browser tests drive, one per test module."""
from __future__ import annotations

from pathlib import Path

import pytest

from browser_helpers import ARTIFACTS, DashboardServer, app_env, build_tiny_app


@pytest.fixture(scope="module")
def dashboard_env(request, tmp_path_factory) -> dict[str, str]:
    """The environment of the module's dashboard: a tiny model of the module's ``SERVER_ARCH`` (default
    ``bert``) with its CSV task, a private headprune home and ``SERVER_EVAL_LIMIT`` examples (default 24).
    A module that serves something else overrides this fixture."""
    arch = getattr(request.module, "SERVER_ARCH", "bert")
    folder = tmp_path_factory.mktemp(f"browser-{arch}")
    tiny = build_tiny_app(folder, arch)
    return app_env(tiny, folder / "hp-home", eval_limit=getattr(request.module, "SERVER_EVAL_LIMIT", 24))


@pytest.fixture(scope="module")
def server(request, dashboard_env):
    """``streamlit run dashboard.py`` on ``dashboard_env``; its log is
    test-artifacts/streamlit-<module>-<model folder>.log."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    model = Path(dashboard_env["HEADPRUNE_APP_MODEL"]).name
    log = ARTIFACTS.parent / f"streamlit-{request.module.__name__.rsplit('.', 1)[-1]}-{model}.log"
    with DashboardServer(dashboard_env, log) as srv:
        yield srv


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test reports what its dashboard server's threads were doing at that moment (a wait that
    never ends leaves no other trace: no error, no CPU)."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, DashboardServer):
            report.sections.append((f"dashboard server threads at the failure ({name})", value.thread_dump()))
