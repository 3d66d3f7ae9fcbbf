"""End to end in a real browser: notebook 08's model view in JupyterLab, in headless Chromium.

What a learner does: open notebook 08, run every cell, type a sentence into the model view and press
Enter, then move the enlarged head with the keyboard; after each, the picture must change, and nothing
may land on stderr. The JupyterLab server (on a copy of the notebooks), the Chromium launch and the waits
are those of ``tests/test_browser.py`` (imported, not copied); screenshots go to ``tests/artifacts/``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    IMAGE_CHANGE_WAIT_S,
    REPO,
    STDERR_OUTPUT,
    Deadline,
    click_menu,
    copy_of_the_notebooks,
    images_in,
    require_browser,
    running_jupyter_lab,
    wait_for_kernel_idle,
    wait_until_all_cells_ran,
)

NOTEBOOK = "notebooks/08_inside_bert.ipynb"
MODEL_VIEW_CALL = "ModelViewExplorer("
TIME_LIMIT_S = 300  # notebook 08 loads sentence-transformers and measures 72 heads: longer than 07
NEW_SENTENCE = "She put her money in the bank by the river."


def cell_index(notebook: str, call: str) -> int:
    """The index (among all cells) of the first code cell of ``notebook`` whose source contains ``call``."""
    cells = json.loads((REPO / notebook).read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code" and call in "".join(cell["source"]):
            return index
    raise AssertionError(f"{notebook} has no cell that calls {call!r}")


def slider(cell, label: str):
    """The explorer's slider labelled ``label`` (ipywidgets 8: noUiSlider; 7: jQuery UI)."""
    sliders = cell.locator(".widget-slider").filter(
        has=cell.page.locator(".widget-label", has_text=re.compile(f"^{label}$", re.I))
    )
    assert sliders.count() >= 1, f"the explorer shows no slider labelled {label!r}"
    return sliders.first


def wait_for_new_picture(page, cell, before: list[str], deadline: Deadline) -> list[str]:
    changed_by = time.monotonic() + min(IMAGE_CHANGE_WAIT_S, deadline.left_s())
    while images_in(cell) in ([], before) and time.monotonic() < changed_by:
        page.wait_for_timeout(250)
    return images_in(cell)


@pytest.mark.browser
def test_model_view_takes_a_typed_sentence_and_a_new_head_in_jupyterlab(tmp_path: Path) -> None:
    require_browser()
    from playwright.sync_api import sync_playwright

    deadline = Deadline(TIME_LIMIT_S)
    explorer_index = cell_index(NOTEBOOK, MODEL_VIEW_CALL)
    root = copy_of_the_notebooks(tmp_path)  # the repository's notebook stays as committed
    with running_jupyter_lab(root, tmp_path, deadline) as (base, token), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(f"{base}/lab/tree/{NOTEBOOK}?reset&token={token}", timeout=deadline.left_ms())
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell", timeout=deadline.left_ms())
            wait_for_kernel_idle(page, deadline)

            click_menu(page, "Edit", "Clear Outputs of All Cells")
            click_menu(page, "Run", "Run All Cells")
            wait_until_all_cells_ran(page, deadline)
            wait_for_kernel_idle(page, deadline)
            errors = page.locator(STDERR_OUTPUT)
            assert errors.count() == 0, "a cell wrote to stderr or raised:\n" + "\n".join(errors.all_inner_texts())

            explorer = page.locator(".jp-Notebook .jp-Cell").nth(explorer_index)
            explorer.scroll_into_view_if_needed()
            explorer.locator(".jupyter-widgets").first.wait_for(timeout=deadline.left_ms())
            assert "Error displaying widget" not in explorer.inner_text()
            first = images_in(explorer)
            assert first, "the model view drew no image"
            explorer.screenshot(path=str(ARTIFACTS / "browser_model_view_first.png"))

            box = explorer.locator(".widget-text input").first
            box.fill(NEW_SENTENCE)
            box.press("Enter")
            typed = wait_for_new_picture(page, explorer, first, deadline)
            explorer.screenshot(path=str(ARTIFACTS / "browser_model_view_typed.png"))
            assert typed and typed != first, "typing a sentence did not redraw the model view"

            head = slider(explorer, "head")
            readout = head.locator(".widget-readout")
            head_before = int(readout.inner_text())
            head.locator(".noUi-handle, .ui-slider-handle").first.focus()
            page.keyboard.press("ArrowRight")
            assert int(readout.inner_text()) == head_before + 1, "ArrowRight did not move the head slider"
            moved = wait_for_new_picture(page, explorer, typed, deadline)
            explorer.screenshot(path=str(ARTIFACTS / "browser_model_view_head.png"))
            assert moved and moved != typed, "choosing another head did not redraw the model view"
            assert page.locator(STDERR_OUTPUT).count() == 0, "using the model view wrote to stderr"
        finally:
            browser.close()
