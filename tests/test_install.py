"""The package installs as a learner installs it, and carries its data.

Colab's setup cell runs ``pip install "bertcourse @ git+..."``: pip clones the repository and builds a
wheel from it. These tests do the same offline: they copy the files git tracks (as a clone holds them,
without build/, egg-info or anything untracked) into a temporary folder, build a wheel there with pip
and an sdist with setuptools' own build hook (and a wheel again from the sdist alone, as ``python -m build``
does), and install the wheel into a folder of its own. Then,
in a fresh interpreter whose working directory is empty and whose ``PYTHONPATH`` is that folder
only (the venv's site-packages still gives torch), they import ``bertcourse`` and read notebook 10's
table from the installed package.

Every ``*.json``, ``*.txt`` and ``*.safetensors`` file that git tracks under ``bertcourse/`` must be
in the wheel and in the sdist, so that a checkpoint or a vocabulary added later cannot be left out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA_SUFFIXES = (".json", ".txt", ".safetensors")


def _git_files() -> list[str] | None:
    """The files git tracks in this repository, or None without git or outside a clone (an sdist's tests/)."""
    if shutil.which("git") is None:
        return None
    result = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout:
        return None
    return [name for name in result.stdout.split("\0") if name]


TRACKED = _git_files()

pytestmark = pytest.mark.skipif(
    TRACKED is None,
    reason="needs git and a clone of the repository: the wheel is built from the files git tracks",
)


def _package_data(names) -> set[str]:
    return {name for name in names if name.startswith("bertcourse/") and name.endswith(DATA_SUFFIXES)}


def _run(command: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A clean copy of the tracked tree, its wheel and its sdist."""
    root = tmp_path_factory.mktemp("install")
    source, dist = root / "source", root / "dist"
    for name in TRACKED:
        # A tracked file deleted in the working tree is not in the next commit either.
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
        + ["--wheel-dir", str(dist), str(source)],
        cwd=root,
    )
    _run(
        [sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(dist)!r})"],
        cwd=source,
    )
    (wheel,) = dist.glob("bertcourse-*.whl")
    (sdist,) = dist.glob("bertcourse-*.tar.gz")
    return {"root": root, "source": source, "wheel": wheel, "sdist": sdist}


def test_the_package_has_data_to_carry():
    # Without one data file the checks below would pass on a wheel of .py files only.
    assert "bertcourse/finetuning/table.json" in _package_data(TRACKED)


def test_the_wheel_holds_every_tracked_data_file(built):
    with zipfile.ZipFile(built["wheel"]) as wheel:
        in_wheel = set(wheel.namelist())
    missing = sorted(_package_data(TRACKED) - in_wheel)
    assert not missing, f"tracked under bertcourse/ but not in the wheel: {missing}; see pyproject's package-data"


def test_the_sdist_holds_every_tracked_data_file_and_builds_the_same_wheel(built):
    with tarfile.open(built["sdist"]) as sdist:
        top = sdist.getnames()[0].split("/")[0]  # bertcourse-<version>
        in_sdist = {name.removeprefix(f"{top}/") for name in sdist.getnames()}
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python 3.10.12+, 3.11.4+
        sdist.extractall(built["root"] / "unpacked", **safe)
    missing = sorted(_package_data(TRACKED) - in_sdist)
    assert not missing, f"tracked under bertcourse/ but not in the sdist: {missing}; see pyproject's package-data"
    # What `python -m build` and pip do with an sdist: build the wheel from it alone.
    again = built["root"] / "from_sdist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
        + ["--wheel-dir", str(again), str(built["root"] / "unpacked" / top)],
        cwd=built["root"],
    )
    (wheel,) = again.glob("bertcourse-*.whl")
    with zipfile.ZipFile(wheel) as from_sdist, zipfile.ZipFile(built["wheel"]) as from_tree:
        assert sorted(from_sdist.namelist()) == sorted(from_tree.namelist())


def test_the_installed_wheel_imports_and_reads_its_table(built):
    target, elsewhere = built["root"] / "target", built["root"] / "elsewhere"
    elsewhere.mkdir()
    _run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target)]
        + [str(built["wheel"])],
        cwd=elsewhere,
    )
    program = """
import json, sys
import bertcourse
from bertcourse.finetuning import table as finetuning_table
table = finetuning_table.load_table()
modules = sorted({m.__file__ for name, m in sys.modules.items()
                  if name.split(".")[0] == "bertcourse" and getattr(m, "__file__", None)})
print(json.dumps({"package": bertcourse.__file__, "table": str(finetuning_table.TABLE_FILE),
                  "modules": modules, "rows": table["rows"]}))
"""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env["PYTHONPATH"] = str(target)
    result = _run([sys.executable, "-c", program], cwd=elsewhere, env=env)
    seen = json.loads(result.stdout.strip().splitlines()[-1])

    installed = str(target.resolve())
    assert seen["package"].startswith(installed), f"imported {seen['package']}, not the installed wheel"
    outside = [name for name in seen["modules"] if not name.startswith(installed)]
    assert not outside, f"modules imported from outside the installed wheel: {outside}"
    assert seen["table"].startswith(installed)
    assert seen["rows"], "load_table() gave no rows"
    for row in seen["rows"]:
        assert isinstance(row["model"], str) and 0.0 <= row["accuracy"] <= 1.0, row
