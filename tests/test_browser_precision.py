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
    STDERR_OUTPUT,
    Deadline,
    cell_index,
    chromium_on_lab,
    images_in,
    open_notebook,
    require_browser,
    run_all_cells,
    shown_widget,
    slider,
    wait_for_new_picture,
)

NOTEBOOK = "notebooks/12_precision_and_scale.ipynb"
TIME_LIMIT_S = 400  # notebook 12 trains a few tiny models and starts three torchrun jobs


@pytest.mark.browser
def test_number_format_and_loss_scale_explorers_respond_in_jupyterlab(tmp_path: Path) -> None:
    require_browser()
    deadline = Deadline(TIME_LIMIT_S)
    number_index = cell_index(NOTEBOOK, "NumberFormatExplorer(")
    scale_index = cell_index(NOTEBOOK, "LossScaleExplorer(")
    with chromium_on_lab(tmp_path, deadline) as (_, page, base, token):
        open_notebook(page, base, token, NOTEBOOK, deadline, reset=True)
        run_all_cells(page, deadline)

        number = shown_widget(page, number_index, deadline)
        first = images_in(number)
        assert first, "the number-format explorer drew no image"
        box = number.locator(".widget-text input").first
        box.fill("70000")
        box.press("Enter")
        typed = wait_for_new_picture(page, number, first, deadline)
        number.screenshot(path=str(ARTIFACTS / "browser_number_format.png"))
        assert typed and typed != first, "typing a number did not redraw the number-format explorer"

        scale = shown_widget(page, scale_index, deadline)
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
