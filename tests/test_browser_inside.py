"""End to end in a real browser: notebook 08's model view in JupyterLab, in headless Chromium.

What a learner does: open notebook 08, run every cell, type a sentence into the model view and press
Enter, then move the enlarged head with the keyboard; after each, the picture must change, and nothing
may land on stderr. The JupyterLab server (on a copy of the notebooks), the Chromium launch and the waits
are those of ``tests/test_browser.py`` (imported, not copied); screenshots go to ``tests/artifacts/``.
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

NOTEBOOK = "notebooks/08_inside_bert.ipynb"
MODEL_VIEW_CALL = "ModelViewExplorer("
TIME_LIMIT_S = 300  # notebook 08 loads sentence-transformers and measures 72 heads: longer than 07
NEW_SENTENCE = "She put her money in the bank by the river."


@pytest.mark.browser
def test_model_view_takes_a_typed_sentence_and_a_new_head_in_jupyterlab(tmp_path: Path) -> None:
    require_browser()
    deadline = Deadline(TIME_LIMIT_S)
    explorer_index = cell_index(NOTEBOOK, MODEL_VIEW_CALL)
    with chromium_on_lab(tmp_path, deadline) as (_, page, base, token):
        open_notebook(page, base, token, NOTEBOOK, deadline, reset=True)
        run_all_cells(page, deadline)

        explorer = shown_widget(page, explorer_index, deadline)
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
