"""End to end in a real browser: notebook 12's explorers in JupyterLab, in headless Chromium.

What a learner does: open notebook 12, run every cell (two short torchrun jobs of 2 processes among them),
type a number into the number-format explorer and press Enter, then move the loss-scale slider with the
keyboard; after each, the picture must change, and nothing may land on stderr. The JupyterLab server (on a
copy of the notebooks), the Chromium launch and the waits are those of ``tests/test_browser.py``
(imported, not copied); screenshots go to ``tests/artifacts/``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
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
from test_browser_inside import cell_index, slider, wait_for_new_picture

NOTEBOOK = "notebooks/12_precision_and_scale.ipynb"
TIME_LIMIT_S = 400  # notebook 12 trains a few tiny models and starts three torchrun jobs


@pytest.mark.browser
def test_number_format_and_loss_scale_explorers_respond_in_jupyterlab(tmp_path: Path) -> None:
    require_browser()
    from playwright.sync_api import sync_playwright

    deadline = Deadline(TIME_LIMIT_S)
    number_index = cell_index(NOTEBOOK, "NumberFormatExplorer(")
    scale_index = cell_index(NOTEBOOK, "LossScaleExplorer(")
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

            number = page.locator(".jp-Notebook .jp-Cell").nth(number_index)
            number.scroll_into_view_if_needed()
            number.locator(".jupyter-widgets").first.wait_for(timeout=deadline.left_ms())
            assert "Error displaying widget" not in number.inner_text()
            first = images_in(number)
            assert first, "the number-format explorer drew no image"
            box = number.locator(".widget-text input").first
            box.fill("70000")
            box.press("Enter")
            typed = wait_for_new_picture(page, number, first, deadline)
            number.screenshot(path=str(ARTIFACTS / "browser_number_format.png"))
            assert typed and typed != first, "typing a number did not redraw the number-format explorer"

            scale = page.locator(".jp-Notebook .jp-Cell").nth(scale_index)
            scale.scroll_into_view_if_needed()
            scale.locator(".jupyter-widgets").first.wait_for(timeout=deadline.left_ms())
            assert "Error displaying widget" not in scale.inner_text()
            before = images_in(scale)
            assert before, "the loss-scale explorer drew no image"
            exponent = slider(scale, r"loss scale 2\^k, k =")
            readout = exponent.locator(".widget-readout")
            k_before = int(readout.inner_text())
            exponent.locator(".noUi-handle, .ui-slider-handle").first.focus()
            page.keyboard.press("ArrowRight")
            assert int(readout.inner_text()) == k_before + 1, "ArrowRight did not move the loss-scale slider"
            moved = wait_for_new_picture(page, scale, before, deadline)
            scale.screenshot(path=str(ARTIFACTS / "browser_loss_scale.png"))
            assert moved and moved != before, "moving the loss scale did not redraw the explorer"
            assert page.locator(STDERR_OUTPUT).count() == 0, "using the explorers wrote to stderr"
        finally:
            browser.close()
