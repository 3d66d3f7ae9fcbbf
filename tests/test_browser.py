"""End to end in a real browser: JupyterLab in headless Chromium runs the attention-explorer notebook.

What a learner does, done by a machine: open notebook 07, which shows ``AttentionExplorer`` on real
weights, run every cell, look for errors, move the layer slider with the keyboard and watch the
picture change.

The test starts its own JupyterLab on 127.0.0.1 (a free port, a known token, and temporary Jupyter
config, runtime, data, settings and workspace folders, so nothing of the machine's Jupyter setup is
read or written), drives Debian's Chromium (``apt-get install chromium``, see ``.ci/run``) through
Playwright with ``executable_path`` (never ``playwright install``: no browser is downloaded), saves
screenshots and the server log to ``tests/artifacts/``, and stops everything it started. The whole
test is bounded by ``TIME_LIMIT_S``.

Without Chromium or Playwright the test fails in CI (``CI=true``) and is skipped, with the reason,
on a developer machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
EXPLORER_NOTEBOOK = "notebooks/07_full_bert.ipynb"
EXPLORER_CALL = "AttentionExplorer("
TIME_LIMIT_S = 180
# JupyterLab user settings for the test's own server: the run is never saved into the repository's
# notebook (no autosave), every cell stays in the page (no virtual scrolling), and no news or
# update check reaches for the network.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}
STDERR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
IMAGE_CHANGE_WAIT_S = 60


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def require_browser() -> None:
    """Skip on a developer machine without Chromium or Playwright; fail in CI."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package (pip install -r requirements-dev.txt)")
    if missing:
        reason = "browser test needs " + " and ".join(missing)
        if in_ci():
            pytest.fail(reason + "; CI must run it")
        pytest.skip(reason)


def explorer_cell_index(notebook: str) -> int:
    """The index (among all cells) of the first cell of ``notebook`` that shows the attention explorer."""
    cells = json.loads((REPO / notebook).read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code" and EXPLORER_CALL in "".join(cell["source"]):
            return index
    raise AssertionError(f"{notebook} has no cell that calls {EXPLORER_CALL!r}")


class Deadline:
    """One time budget shared by every wait of the test."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left_s(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the browser test ran past its {self.seconds:.0f} s limit")
        return left

    def left_ms(self) -> float:
        return self.left_s() * 1000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_lab_settings(settings_dir: Path) -> None:
    for relative, values in LAB_SETTINGS.items():
        path = settings_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")


def log_tail(log_path: Path, lines: int = 30) -> str:
    return "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def wait_until_serving(server: subprocess.Popen, status_url: str, log_path: Path, deadline: Deadline) -> None:
    while True:
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited with {server.returncode}:\n{log_tail(log_path)}")
        try:
            with urllib.request.urlopen(status_url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        try:
            deadline.left_s()
        except TimeoutError as error:
            raise AssertionError(f"JupyterLab did not start in time:\n{log_tail(log_path)}") from error
        time.sleep(0.5)


def stop_server(server: subprocess.Popen) -> None:
    """Stop JupyterLab (it shuts its kernels down), then anything left in the process group it leads."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.pid, signal.SIGKILL)


@contextlib.contextmanager
def running_jupyter_lab(root_dir: Path, scratch: Path, deadline: Deadline) -> Iterator[str]:
    """Start JupyterLab on a free loopback port; yield the URL prefix that carries the token."""
    port, token = free_port(), secrets.token_hex(16)
    write_lab_settings(scratch / "settings")
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(scratch / "config"),
        "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
        "JUPYTER_DATA_DIR": str(scratch / "data"),
        "IPYTHONDIR": str(scratch / "ipython"),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--port-retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        f"--LabApp.user_settings_dir={scratch / 'settings'}",
        f"--LabApp.workspaces_dir={scratch / 'workspaces'}",
        f"--FileCheckpoints.checkpoint_dir={scratch / 'checkpoints'}",  # not .ipynb_checkpoints/ in the repository
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log_path = ARTIFACTS / "jupyterlab.log"
    with log_path.open("w", encoding="utf-8") as log:
        server = subprocess.Popen(
            command, cwd=root_dir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_serving(server, f"{base}/api/status?token={token}", log_path, deadline)
            yield base, token
        finally:
            stop_server(server)


def click_menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
    page.locator(".lm-Menu-item:visible .lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def wait_for_kernel_idle(page, deadline: Deadline) -> None:
    """Wait until the status bar reads "<kernel name> | Idle" (the kernel has started and is not busy)."""
    status = page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\|\s*Idle\s*$"))
    status.first.wait_for(timeout=deadline.left_ms())


def wait_until_all_cells_ran(page, deadline: Deadline) -> int:
    """Wait until every code cell shows an execution count; return how many code cells there are."""
    prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt")
    while True:
        texts = [text.strip() for text in prompts.all_inner_texts()]
        if texts and all(re.fullmatch(r"\[\d+\]:", text) for text in texts):
            return len(texts)
        errors = page.locator(STDERR_OUTPUT)
        if errors.count() and "[*]:" not in texts:  # a cell failed and JupyterLab dropped the rest of the queue
            raise AssertionError("a cell failed while running all cells:\n" + "\n".join(errors.all_inner_texts()))
        if deadline.left_s() < 1:
            pending = [i for i, text in enumerate(texts) if not re.fullmatch(r"\[\d+\]:", text)]
            raise AssertionError(f"code cells {pending} did not finish running; prompts: {texts}")
        page.wait_for_timeout(500)


def images_in(cell) -> list[str]:
    return [image.get_attribute("src") or "" for image in cell.locator(".jp-OutputArea-output img").all()]


def layer_slider(cell):
    """The explorer's slider labelled 'layer' (ipywidgets 8: noUiSlider; 7: jQuery UI)."""
    sliders = cell.locator(".widget-slider").filter(
        has=cell.page.locator(".widget-label", has_text=re.compile("layer", re.I))
    )
    assert sliders.count() >= 1, "the explorer shows no slider labelled 'layer'"
    return sliders.first


def test_attention_explorer_runs_and_responds_in_jupyterlab(tmp_path: Path) -> None:
    require_browser()
    from playwright.sync_api import sync_playwright

    deadline = Deadline(TIME_LIMIT_S)
    notebook, explorer_index = EXPLORER_NOTEBOOK, explorer_cell_index(EXPLORER_NOTEBOOK)
    with running_jupyter_lab(REPO, tmp_path, deadline) as (base, token), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(f"{base}/lab/tree/{notebook}?reset&token={token}", timeout=deadline.left_ms())
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell", timeout=deadline.left_ms())
            wait_for_kernel_idle(page, deadline)

            click_menu(page, "Edit", "Clear Outputs of All Cells")
            click_menu(page, "Run", "Run All Cells")
            code_cells = wait_until_all_cells_ran(page, deadline)
            wait_for_kernel_idle(page, deadline)
            page.screenshot(path=str(ARTIFACTS / "browser_notebook.png"), full_page=True)

            errors = page.locator(STDERR_OUTPUT)
            assert errors.count() == 0, "a cell wrote to stderr or raised:\n" + "\n".join(errors.all_inner_texts())
            assert code_cells >= 2

            explorer = page.locator(".jp-Notebook .jp-Cell").nth(explorer_index)
            explorer.scroll_into_view_if_needed()
            explorer.locator(".jupyter-widgets").first.wait_for(timeout=deadline.left_ms())
            assert "Error displaying widget" not in explorer.inner_text()
            slider = layer_slider(explorer)
            before = images_in(explorer)
            assert before, "the explorer drew no image"
            explorer.screenshot(path=str(ARTIFACTS / "browser_explorer_before.png"))

            readout = slider.locator(".widget-readout")
            layer_before = int(readout.inner_text())
            handle = slider.locator(".noUi-handle, .ui-slider-handle").first
            handle.focus()
            page.keyboard.press("ArrowRight")
            assert int(readout.inner_text()) == layer_before + 1, "ArrowRight did not move the layer slider"
            changed_by = time.monotonic() + min(IMAGE_CHANGE_WAIT_S, deadline.left_s())
            while images_in(explorer) in ([], before) and time.monotonic() < changed_by:
                page.wait_for_timeout(250)
            explorer.screenshot(path=str(ARTIFACTS / "browser_explorer_after.png"))
            after = images_in(explorer)
            assert after and after != before, "moving the layer slider did not redraw the explorer's picture"
            assert page.locator(STDERR_OUTPUT).count() == 0, "moving the slider wrote to stderr"
        finally:
            browser.close()
