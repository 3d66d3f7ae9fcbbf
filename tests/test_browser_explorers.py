"""End to end in a real browser: the token labels of notebook 09's masking table and notebook 11's window map are
readable as JupyterLab shows them, and how long each takes to redraw (issue 33).

Both explorers run in a small scratch notebook (beside the copy of the notebooks the JupyterLab of
``tests/test_browser.py`` serves) that builds them as notebooks 09 and 11 do: ``MLMMaskingExplorer`` on the
course's own vocabulary (the shipped run's tokenizer, the one notebook 09 trains: the notebook asserts they are
the same) and ``WindowExplorer`` on the installed model. Running the two notebooks whole would take minutes.

- Label size as displayed, in CSS px: a picture wider than the output area is shrunk to fit it, so a label of
  ``p`` points on a figure of ``dpi`` dots per inch shows at ``p / 72 * dpi * shown_width / png_width`` px. The
  browser gives the two widths; the points and the dpi come from the same explorer drawn here, in this process,
  with the same code and matplotlib settings as the kernel (the smallest text of the whole figure, so every label
  counts). It must be at least ``MIN_LABEL_PX``, in the test's 1400-px-wide window.
- Redraw time: from the key press that moves a slider to the new picture loaded in the page, the median of
  ``REDRAWS`` moves; printed and written to ``tests/artifacts/explorer_redraws.json``, and bounded by
  ``MAX_REDRAW_S`` (generous: the machine is shared).
"""

from __future__ import annotations

import functools
import json
import statistics
import time
from pathlib import Path

import matplotlib
import nbformat
import pytest
from test_browser import (
    ARTIFACTS,
    STDERR_OUTPUT,
    Deadline,
    chromium_on_lab,
    open_notebook,
    require_browser,
    run_all_cells,
    shown_widget,
    slider,
)

TIME_LIMIT_S = 170
MIN_LABEL_PX = 10.0  # the smallest text of either picture, as displayed
MAX_REDRAW_S = 6.0
REDRAWS = 3
SCRATCH = "explorers_check.ipynb"
SETUP = """\
import bertcourse as bc
from bertcourse import pretraining
from bertcourse.widgets import MLMMaskingExplorer, WindowExplorer

_, tok09, _ = pretraining.load_shipped_run()  # notebook 09's vocabulary
model, tok = bc.load_pretrained()  # notebook 11's model"""
EXPLORERS = {  # name: (cell source, the slider the test moves)
    "masking table (09)": ("MLMMaskingExplorer(tok09, seed=0)", "seed"),
    "window map (11)": ("WindowExplorer(tok, model)", "window"),
}
SHOWN = """(cell) => { const i = cell.querySelector('.jp-OutputArea-output img');
    return i && i.complete ? [i.src, i.naturalWidth, i.getBoundingClientRect().width] : null; }"""
NEW_PICTURE = """([cell, before]) => { const i = cell.querySelector('.jp-OutputArea-output img');
    return !!i && i.src !== before && i.complete && i.naturalWidth > 0; }"""


@functools.cache
def setup_names() -> dict:
    """The names ``SETUP`` defines, here in this process."""
    matplotlib.use("Agg")
    names: dict = {}
    exec(SETUP, names)  # noqa: S102 -- the setup cell above
    return names


def smallest_text(source: str) -> tuple[float, float]:
    """(points, dpi): the smallest visible text of the explorer that ``source`` builds, drawn in this process."""
    figure = eval(source, setup_names()).drawn["figure"]  # noqa: S307 -- one of the two sources above
    texts = [t for t in figure.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
    return min(t.get_fontsize() for t in texts), figure.dpi


def scratch_notebook(folder: Path) -> list[int]:
    """Write the scratch notebook; the indices of its explorer cells, in ``EXPLORERS``' order."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP)] + [nbformat.v4.new_code_cell(s) for s, _ in EXPLORERS.values()]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, folder / SCRATCH)
    return list(range(1, len(nb.cells)))


@pytest.mark.browser
def test_explorer_labels_are_readable_and_redraw_times_are_measured(tmp_path: Path) -> None:
    require_browser()
    deadline = Deadline(TIME_LIMIT_S)
    measured = {}
    with chromium_on_lab(tmp_path, deadline) as (_, page, base, token):
        indices = scratch_notebook(tmp_path / "course" / "notebooks")
        open_notebook(page, base, token, f"notebooks/{SCRATCH}", deadline, reset=True)
        run_all_cells(page, deadline)
        for (name, (source, control)), index in zip(EXPLORERS.items(), indices, strict=True):
            explorer = shown_widget(page, index, deadline)
            handle = explorer.element_handle()
            src, png_width, shown_width = page.wait_for_function(SHOWN, arg=handle).json_value()
            times = []
            for _ in range(REDRAWS):
                explorer.scroll_into_view_if_needed()
                slider(explorer, control).locator(".noUi-handle, .ui-slider-handle").first.focus()
                start = time.monotonic()
                page.keyboard.press("ArrowRight")
                page.wait_for_function(NEW_PICTURE, arg=[handle, src], timeout=deadline.left_ms())
                times.append(time.monotonic() - start)
                src, png_width, shown_width = page.evaluate(SHOWN, handle)
            explorer.screenshot(path=str(ARTIFACTS / f"explorer_{control}.png"))
            points, dpi = smallest_text(source)
            measured[name] = {
                "smallest_text_pt": points,
                "dpi": dpi,
                "png_width_px": png_width,
                "shown_width_px": round(shown_width, 1),
                "smallest_text_shown_px": round(points / 72 * dpi * min(1.0, shown_width / png_width), 2),
                "redraw_s": [round(t, 2) for t in times],
                "median_redraw_s": round(statistics.median(times), 2),
            }
        assert page.locator(STDERR_OUTPUT).count() == 0, "using the explorers wrote to stderr"
    (ARTIFACTS / "explorer_redraws.json").write_text(json.dumps(measured, indent=1), encoding="utf-8")
    print(json.dumps(measured, indent=1))
    for name, values in measured.items():
        assert values["smallest_text_shown_px"] >= MIN_LABEL_PX, f"{name}: labels too small to read: {values}"
        assert values["median_redraw_s"] <= MAX_REDRAW_S, f"{name}: redraws too slowly: {values}"
