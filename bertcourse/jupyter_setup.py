"""The one JupyterLab setting the course needs, for a local install as Binder has it: save the widgets' state.

    python -m bertcourse.jupyter_setup

JupyterLab does not save a notebook's widget state by default. A notebook saved after its explorers ran and
reopened once its kernel has stopped then shows "Error displaying widget: model not found" where each explorer
was. With ``saveState`` on (Settings, then Save Widget State Automatically) it shows each explorer as it was
last drawn, with a red "disconnected" icon: the sliders have no kernel behind them until you run the notebook
again, which redraws them live.

The setting goes into ``<sys.prefix>/share/jupyter/lab/settings/overrides.json``, where JupyterLab reads the
defaults of the environment it runs in (your venv's own): nothing outside that environment is touched, and the
other settings already in the file are kept. Binder's ``binder/postBuild`` runs the same command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WIDGET_MANAGER = "@jupyter-widgets/jupyterlab-manager:plugin"


def overrides_file(prefix=None) -> Path:
    """Where JupyterLab reads the environment's setting overrides."""
    return Path(sys.prefix if prefix is None else prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def enable_widget_state(prefix=None) -> Path:
    """Turn on "Save Widget State Automatically" for the JupyterLab of ``prefix`` (this environment by default).

    Keeps every other setting of the overrides file; refuses, without writing, a file that is not a JSON object.
    """
    path = overrides_file(prefix)
    settings = {}
    if path.is_file():
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error}): fix or remove it, then run this again.") from None
        if not isinstance(settings, dict) or not isinstance(settings.get(WIDGET_MANAGER, {}), dict):
            raise ValueError(f"{path} must hold a JSON object of settings per plugin; it was left as it is.")
    settings.setdefault(WIDGET_MANAGER, {})["saveState"] = True
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return path


def main() -> None:
    path = enable_widget_state()
    print(f"JupyterLab will save the widgets' state with each notebook (set in {path}).")


if __name__ == "__main__":
    main()
