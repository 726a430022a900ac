"""The Share page's command reproduces the page: a head clicked on the Head map, the command copied from the
Share page and run in a shell prints the figure the pages show, to the digits shown.

On a tiny BERT (24 examples) and, marked slow, on the real default at its own evaluation size (skipped when it
is not prepared). The command runs as copied, in bash, with this checkout first on PYTHONPATH.
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from browser_helpers import LIVE_STRIP, ROOT, app_env, build_tiny_app, head_points, new_page, wait_idle, wait_live

pytestmark = pytest.mark.browser
playwright = pytest.importorskip("playwright.sync_api")

TIMEOUT_MS = 600_000         # the default's first page load scores its heads on a busy machine
SHOWN = re.compile(r"as the dashboard shows it: (.+), loss (\d+\.\d{4})")


@pytest.fixture(scope="module", params=["tiny-bert", pytest.param("default", marks=pytest.mark.slow)])
def dashboard_env(request, tmp_path_factory) -> dict[str, str]:
    """A tiny BERT evaluated on 24 examples, or the real default at its own size (no HEADPRUNE_APP_EVAL_LIMIT)."""
    if request.param == "default":
        from pruning_core.modeling.sources import catalog

        if not catalog.get("default").is_prepared():
            pytest.skip(f"the default model is not prepared: run `{catalog.get('default').command()}`")
        return {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "HEADPRUNE_APP_DEVICE": "cpu",
                "HEADPRUNE_APP_MODEL": "default", "HEADPRUNE_APP_TASK": "movie-sentiment"}
    folder = tmp_path_factory.mktemp("share-command")
    return app_env(build_tiny_app(folder, "bert"), folder / "hp-home", eval_limit=24)


def heads_shown(page) -> tuple[int, int]:
    kept, total = re.search(r"(\d+) / (\d+)", page.locator(LIVE_STRIP).text_content()).groups()
    return int(kept), int(total)


def shell_command(copied: str) -> str:
    """The copied command as a shell runs it: ``headprune`` is this interpreter's script when installed beside
    it, else ``python -m pruning_core`` (the same tool)."""
    script = Path(sys.executable).with_name("headprune")
    if script.exists():
        return f"PATH={shlex.quote(str(script.parent))}:\"$PATH\" {copied}"
    assert copied.startswith("headprune "), copied
    return f"{shlex.quote(sys.executable)} -m pruning_core {copied.removeprefix('headprune ')}"


def test_the_share_pages_command_prints_the_pages_figure(server, browser):
    page = new_page(browser, height=1400)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{server.url}/head_map")
    wait_live(page, " / ", timeout_s=TIMEOUT_MS / 1000)
    _, total = heads_shown(page)
    wait_live(page, f"{total} / {total}", timeout_s=TIMEOUT_MS / 1000)
    wait_idle(page, TIMEOUT_MS)
    point = head_points(page).nth(1)
    box = point.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    strip = " ".join(wait_live(page, f"{total - 1} / {total}", timeout_s=TIMEOUT_MS / 1000).split())
    wait_idle(page, TIMEOUT_MS)

    page.get_by_role("link", name="Share").first.click()          # the same session: its mask goes along
    command_block = page.locator("code", has_text="headprune evaluate --mask-link")
    command_block.wait_for(timeout=TIMEOUT_MS)
    wait_idle(page, TIMEOUT_MS)
    copied = command_block.text_content().strip()
    said = page.locator('[data-testid="stCaptionContainer"]', has_text="as the dashboard shows it").text_content()
    page_figure, page_loss = SHOWN.search(" ".join(said.split())).groups()
    assert "mask=" in copied and "n=" in copied, copied

    done = subprocess.run(["bash", "-c", shell_command(copied)], cwd=ROOT, env=server.env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "overrides" not in done.stdout, done.stdout
    cli_figure, cli_loss = SHOWN.search(done.stdout).groups()
    assert (cli_figure, cli_loss) == (page_figure, page_loss), (done.stdout, said)
    value = page_figure.split(" (")[0].split(" ", 1)[1]               # 'accuracy 87 %' -> '87 %'
    assert f"{value} · loss {cli_loss}" in strip, (strip, done.stdout)    # the Head map showed the same
    assert f"{total - 1}/{total} heads kept" in done.stdout
    page.context.close()
