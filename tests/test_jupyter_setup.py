"""python -m bertcourse.jupyter_setup: the widget-state setting written into the environment, other settings kept."""

import json
import subprocess
import sys

import pytest

from bertcourse.jupyter_setup import WIDGET_MANAGER, enable_widget_state, overrides_file


def test_the_setting_is_written_and_other_settings_are_kept(tmp_path):
    path = overrides_file(tmp_path)
    assert path == tmp_path / "share/jupyter/lab/settings/overrides.json"
    assert enable_widget_state(tmp_path) == path
    assert json.loads(path.read_text()) == {WIDGET_MANAGER: {"saveState": True}}
    theme = {"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}
    path.write_text(json.dumps({**theme, WIDGET_MANAGER: {"saveState": False, "other": 1}}))
    enable_widget_state(tmp_path)
    assert json.loads(path.read_text()) == {**theme, WIDGET_MANAGER: {"saveState": True, "other": 1}}


@pytest.mark.parametrize("content", ["{not json", "[]", json.dumps({WIDGET_MANAGER: 3})])
def test_a_file_that_is_not_settings_is_refused_and_left_alone(tmp_path, content):
    path = overrides_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(ValueError, match=r"overrides\.json (is not valid JSON|must hold a JSON object)"):
        enable_widget_state(tmp_path)
    assert path.read_text() == content


def test_the_command_line_writes_into_the_environment_it_runs_in(tmp_path):
    program = "import sys; sys.prefix = sys.argv[1]; from bertcourse.jupyter_setup import main; main()"
    result = subprocess.run([sys.executable, "-c", program, str(tmp_path)], capture_output=True, text=True, check=True)
    assert "save the widgets' state" in result.stdout
    assert json.loads(overrides_file(tmp_path).read_text())[WIDGET_MANAGER] == {"saveState": True}
