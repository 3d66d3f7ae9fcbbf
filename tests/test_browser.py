"""End to end in a real browser: JupyterLab in headless Chromium, as a learner meets the notebooks.

What a learner does, done by a machine:

- open every notebook without running it (a fresh clone is untrusted, so JupyterLab will not
  render a widget): each explorer shows the picture it drew when the notebook was executed, never
  its text form (``VBox(children=...``) and never "Error displaying widget";
- open notebook 07, which shows ``AttentionExplorer`` on real weights, run every cell, look for
  errors, move the layer slider with the keyboard and watch the picture change;
- save it, shut its kernel down, open it again: the explorer is drawn again from the widget state
  saved with the notebook, without an error. JupyterLab saves that state only with its setting
  "Save Widget State Automatically" (Settings menu), which the test turns on as the README tells
  learners to; without it every widget of a reopened notebook whose kernel is gone reads
  "Error displaying widget: model not found", whatever the notebook holds.

A test without the browser checks the same promise in the files: every widget output of every
committed notebook carries its picture beside the widget view (``tests/execute_notebooks.py``
puts it there).

Opening is neutral (issue 33): a committed notebook opened and saved (Ctrl+S) without running anything
is not marked modified and stays byte-identical, with "Save Widget State Automatically" on. JupyterLab's
widget manager then saves only the models of the running kernel, so the committed widget state is the
empty one it would write (``execute_notebooks.UNRUN_WIDGET_STATE``); a test without the browser checks
that, and that each file is laid out as the Jupyter server writes a notebook (``nbformat.writes``).

The browser tests start their own JupyterLab on 127.0.0.1 (a free port, a known token, and
temporary Jupyter config, runtime, data, settings and workspace folders, so nothing of the
machine's Jupyter setup is read or written) on a copy of the notebooks (saving never touches the
repository), drive Debian's Chromium (``apt-get install chromium``, see ``.ci/run``) through
Playwright with ``executable_path`` (never ``playwright install``: no browser is downloaded), save
screenshots and the server log to ``tests/artifacts/``, and stop everything they started. Each
test is bounded by ``TIME_LIMIT_S`` (the unrun notebooks: ``UNRUN_LIMIT_PER_NOTEBOOK_S`` each).

Without Chromium or Playwright the browser tests fail in CI (``CI=true``) and are skipped, with the
reason, on a developer machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
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
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXPLORER_NOTEBOOK = "notebooks/07_full_bert.ipynb"
OPENED_AND_SAVED = ["notebooks/06_layernorm_residual_ffn.ipynb", "notebooks/12_precision_and_scale.ipynb"]
EXPLORER_CALL = "AttentionExplorer("
TIME_LIMIT_S = 300
UNRUN_LIMIT_PER_NOTEBOOK_S = 60  # opening one notebook without running it
# JupyterLab user settings for the test's own server: nothing is saved unless the test saves (no
# autosave), a saved notebook keeps its widgets' state (the setting the README recommends), every
# cell stays in the page (no virtual scrolling), and no news or update check reaches for the network.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyter-widgets/jupyterlab-manager/plugin.jupyterlab-settings": {"saveState": True},
}
STDERR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
IMAGE_CHANGE_WAIT_S = 60
PICTURE_WAIT_S = 30
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_TEXT = re.compile(r"\b[A-Z]\w*\((children|value)=")  # a widget as text: VBox(children=..., IntSlider(value=...
WIDGET_ERROR = "Error displaying widget"


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


def cell_index(notebook: str, call: str) -> int:
    """The index (among all cells) of the first code cell of ``notebook`` whose source contains ``call``."""
    cells = json.loads((REPO / notebook).read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code" and call in "".join(cell["source"]):
            return index
    raise AssertionError(f"{notebook} has no cell that calls {call!r}")


def has_picture(output: dict) -> bool:
    return "image/png" in output["data"]


def widget_outputs(path: Path) -> list[tuple[int, dict]]:
    """(index among all cells, output) for every widget view a committed notebook shows."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        (index, output)
        for index, cell in enumerate(cells)
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]


def copy_of_the_notebooks(scratch: Path) -> Path:
    """A copy of notebooks/ (the tests save notebooks; the repository's stay as committed)."""
    root = scratch / "course"
    shutil.copytree(REPO / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return root


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


def api(base: str, token: str, path: str, method: str = "GET"):
    """Call the Jupyter server's REST API; the JSON answer, or None when there is none."""
    request = urllib.request.Request(f"{base}{path}", method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


def shut_down_kernels(base: str, token: str) -> None:
    """Stop every kernel of the server, as a restart of JupyterLab or of the machine would."""
    for kernel in api(base, token, "/api/kernels"):
        api(base, token, f"/api/kernels/{kernel['id']}", method="DELETE")


def open_notebook(page, base: str, token: str, notebook: str, deadline: Deadline, reset: bool = False) -> None:
    query = "?reset&" if reset else "?"
    page.goto(f"{base}/lab/tree/{notebook}{query}token={token}", timeout=deadline.left_ms())
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell", timeout=deadline.left_ms())


def new_page(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(30_000)
    return page


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


def wait_for_a_picture(cell, deadline: Deadline) -> list[str]:
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-OutputArea-output img").first.wait_for(timeout=min(PICTURE_WAIT_S * 1000, deadline.left_ms()))
    return images_in(cell)


def save_notebook(page, deadline: Deadline) -> None:
    """Save the open notebook and wait until the server has written it."""
    with page.expect_response(
        lambda response: "/api/contents/" in response.url and response.request.method == "PUT",
        timeout=deadline.left_ms(),
    ) as saved:
        click_menu(page, "File", "Save Notebook")
    assert saved.value.ok, f"saving failed: HTTP {saved.value.status}"


def slider(cell, label: str):
    """The explorer's slider labelled ``label`` (ipywidgets 8: noUiSlider; 7: jQuery UI)."""
    sliders = cell.locator(".widget-slider").filter(
        has=cell.page.locator(".widget-label", has_text=re.compile(f"^{label}$", re.I))
    )
    assert sliders.count() >= 1, f"the explorer shows no slider labelled {label!r}"
    return sliders.first


def wait_for_new_picture(page, cell, before: list[str], deadline: Deadline) -> list[str]:
    """The cell's pictures once they differ from ``before`` (or as they are after ``IMAGE_CHANGE_WAIT_S``)."""
    changed_by = time.monotonic() + min(IMAGE_CHANGE_WAIT_S, deadline.left_s())
    while images_in(cell) in ([], before) and time.monotonic() < changed_by:
        page.wait_for_timeout(250)
    return images_in(cell)


@contextlib.contextmanager
def chromium_on_lab(scratch: Path, deadline: Deadline) -> Iterator[tuple]:
    """JupyterLab on a copy of the notebooks (the repository's stay as committed) and a page of Chromium:
    yields (browser, page, base URL, token), and closes the browser and stops the server afterwards."""
    from playwright.sync_api import sync_playwright

    root = copy_of_the_notebooks(scratch)
    with running_jupyter_lab(root, scratch, deadline) as (base, token), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser, new_page(browser), base, token
        finally:
            browser.close()


def run_all_cells(page, deadline: Deadline, screenshot: str | None = None) -> int:
    """Clear every output, run all cells and wait until the kernel is idle again (a screenshot of the whole
    notebook then, if named); fail if a cell wrote to stderr or raised. Returns the number of code cells."""
    wait_for_kernel_idle(page, deadline)
    click_menu(page, "Edit", "Clear Outputs of All Cells")
    click_menu(page, "Run", "Run All Cells")
    code_cells = wait_until_all_cells_ran(page, deadline)
    wait_for_kernel_idle(page, deadline)
    if screenshot:
        page.screenshot(path=str(ARTIFACTS / screenshot), full_page=True)
    errors = page.locator(STDERR_OUTPUT)
    assert errors.count() == 0, "a cell wrote to stderr or raised:\n" + "\n".join(errors.all_inner_texts())
    return code_cells


def shown_widget(page, index: int, deadline: Deadline):
    """Cell ``index``, scrolled into view, once its widget is displayed, and not as "Error displaying widget"."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.scroll_into_view_if_needed()
    cell.locator(".jupyter-widgets").first.wait_for(timeout=deadline.left_ms())
    assert WIDGET_ERROR not in cell.inner_text(), f"cell {index}: {cell.inner_text()[:200]!r}"
    return cell


def test_every_widget_output_carries_its_picture() -> None:
    """Without a browser: the files hold what an unrun notebook needs to show each explorer as drawn."""
    assert NOTEBOOKS, "no notebooks/NN_name.ipynb found"
    missing = [
        f"{path.name} cell {index}"
        for path in NOTEBOOKS
        for index, output in widget_outputs(path)
        if not has_picture(output)
    ]
    assert not missing, (
        "widget outputs without the picture they drew (re-execute with python tests/execute_notebooks.py): "
        + ", ".join(missing)
    )


def test_every_notebook_is_written_as_jupyterlab_saves_it_unrun() -> None:
    """Without a browser: what makes open + save a no-op. Each committed notebook's widget state is the one
    JupyterLab saves for a notebook none of whose widgets is live, and its bytes are the server's layout of its
    content (nbformat's JSON: one-space indent, sorted keys, a final newline)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nbformat
    from execute_notebooks import UNRUN_WIDGET_STATE, WIDGET_STATE

    wrong = []
    for path in NOTEBOOKS:
        text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        state = nb.metadata.get("widgets", {}).get(WIDGET_STATE)
        if state not in (None, UNRUN_WIDGET_STATE):
            wrong.append(f"{path.name}: a widget state of {len(state.get('state', {}))} models")
        if nbformat.writes(nb) + "\n" != text:
            wrong.append(f"{path.name}: not laid out as the Jupyter server writes it")
    assert not wrong, "JupyterLab would rewrite these notebooks on their first save (fix with python " + (
        "tests/execute_notebooks.py --restate NOTEBOOK, or re-execute them): " + "; ".join(wrong)
    )


def test_every_browser_test_carries_the_browser_marker() -> None:
    """``pytest -m "not browser"`` leaves out exactly the tests that drive Chromium (those that call
    ``require_browser``), and the marker is registered (pyproject's [tool.pytest.ini_options] markers)."""
    import ast

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    unmarked = []
    for path in sorted(Path(__file__).parent.glob("test_browser*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            calls = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
            marked = any(ast.unparse(d) == "pytest.mark.browser" for d in node.decorator_list)
            if ("require_browser" in calls) != marked:
                unmarked.append(f"{path.name}::{node.name}")
    assert not unmarked, f"mark exactly the tests that call require_browser() with @pytest.mark.browser: {unmarked}"
    markers = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert any(line.split(":")[0].strip() == "browser" for line in markers["markers"])


@pytest.mark.browser
def test_unrun_notebooks_show_every_explorer_as_drawn(tmp_path: Path) -> None:
    require_browser()
    # The notebooks whose widget outputs all carry their picture; the test above names any other.
    shown = [(path, widget_outputs(path)) for path in NOTEBOOKS]
    shown = [(path, outputs) for path, outputs in shown if outputs and all(has_picture(o) for _, o in outputs)]
    assert shown, "no notebook shows a widget with its picture"
    deadline = Deadline(UNRUN_LIMIT_PER_NOTEBOOK_S * len(shown))
    with chromium_on_lab(tmp_path, deadline) as (_, page, base, token):
        for path, outputs in shown:
            open_notebook(page, base, token, f"notebooks/{path.name}", deadline, reset=True)
            for index in sorted({index for index, _ in outputs}):
                cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
                wait_for_a_picture(cell, deadline)
                text = cell.locator(".jp-Cell-outputArea").inner_text()
                where = f"{path.name}, cell {index}, before running"
                assert not WIDGET_TEXT.search(text), f"{where}: the widget shows as text: {text[:200]!r}"
                assert WIDGET_ERROR not in text, f"{where}: {text[:200]!r}"
            page.screenshot(path=str(ARTIFACTS / f"unrun_{path.stem}.png"))
            shut_down_kernels(base, token)  # opening started one; the next notebook starts its own


@pytest.mark.browser
def test_attention_explorer_runs_responds_and_reopens_in_jupyterlab(tmp_path: Path) -> None:
    require_browser()
    deadline = Deadline(TIME_LIMIT_S)
    notebook, explorer_index = EXPLORER_NOTEBOOK, cell_index(EXPLORER_NOTEBOOK, EXPLORER_CALL)
    with chromium_on_lab(tmp_path, deadline) as (browser, page, base, token):
        open_notebook(page, base, token, notebook, deadline, reset=True)
        assert run_all_cells(page, deadline, screenshot="browser_notebook.png") >= 2

        explorer = shown_widget(page, explorer_index, deadline)
        layer = slider(explorer, "layer")
        before = images_in(explorer)
        assert before, "the explorer drew no image"
        explorer.screenshot(path=str(ARTIFACTS / "browser_explorer_before.png"))

        readout = layer.locator(".widget-readout")
        layer_before = int(readout.inner_text())
        layer.locator(".noUi-handle, .ui-slider-handle").first.focus()
        page.keyboard.press("ArrowRight")
        assert int(readout.inner_text()) == layer_before + 1, "ArrowRight did not move the layer slider"
        after = wait_for_new_picture(page, explorer, before, deadline)
        explorer.screenshot(path=str(ARTIFACTS / "browser_explorer_after.png"))
        assert after and after != before, "moving the layer slider did not redraw the explorer's picture"
        assert page.locator(STDERR_OUTPUT).count() == 0, "moving the slider wrote to stderr"

        save_notebook(page, deadline)
        shut_down_kernels(base, token)
        reopened = new_page(browser)
        page.close()
        open_notebook(reopened, base, token, notebook, deadline)
        wait_for_kernel_idle(reopened, deadline)
        explorer = shown_widget(reopened, explorer_index, deadline)
        assert wait_for_a_picture(explorer, deadline) == after, "the reopened explorer lost its last drawing"
        assert WIDGET_ERROR not in explorer.inner_text(), "the reopened notebook cannot display its explorer"
        explorer.screenshot(path=str(ARTIFACTS / "browser_explorer_reopened.png"))


@pytest.mark.browser
def test_a_notebook_opened_and_saved_unrun_stays_byte_identical(tmp_path: Path) -> None:
    """Open a committed notebook, run nothing, press Ctrl+S: the file is the committed one, byte for byte, and
    JupyterLab did not mark it modified on opening (autosave would then have saved it)."""
    require_browser()
    deadline = Deadline(UNRUN_LIMIT_PER_NOTEBOOK_S * len(OPENED_AND_SAVED))
    with chromium_on_lab(tmp_path, deadline) as (_, page, base, token):
        for notebook in OPENED_AND_SAVED:
            open_notebook(page, base, token, notebook, deadline, reset=True)
            wait_for_kernel_idle(page, deadline)  # the widget manager has restored what it restores by now
            page.wait_for_timeout(1000)
            assert page.locator(".jp-NotebookPanel.jp-mod-dirty, .lm-TabBar-tab.jp-mod-dirty").count() == 0, (
                f"{notebook}: opening it marked it modified"
            )
            with page.expect_response(
                lambda response: "/api/contents/" in response.url and response.request.method == "PUT",
                timeout=deadline.left_ms(),
            ) as saved:
                page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
                page.keyboard.press("Control+s")
            assert saved.value.ok, f"{notebook}: saving failed: HTTP {saved.value.status}"
            after = (tmp_path / "course" / notebook).read_bytes()
            assert after == (REPO / notebook).read_bytes(), f"{notebook}: opened and saved, its file changed"
            shut_down_kernels(base, token)
