"""bertcourse.finetuning_table: each row's function on tiny data, the script writing and merging its JSON, the
tiny-BERT rows on a pretrained checkpoint folder, and the committed table the notebook prints."""

from __future__ import annotations

import json

import pytest
import torch

import bertcourse as bc
from bertcourse import finetuning_table as table
from bertcourse.finetuning import BertForSequenceClassification
from bertcourse.heads import BertForPreTraining
from bertcourse.pretraining import tiny_config, train_wordpiece

TRAIN = [
    ("A joyous, tender film.", 1),
    ("Dull, dull, dull.", 0),
    ("Funny and smart.", 1),
    ("A bore from start to finish.", 0),
] * 4
TEST = [("Tender and funny.", 1), ("A dull bore.", 0)]


@pytest.fixture(scope="module")
def tok():
    return bc.WordPieceTokenizer.from_folder(bc.pretrained.default_weights_dir())


def small_classifier(tok):
    config = bc.BertConfig(
        vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    torch.manual_seed(0)
    return BertForSequenceClassification(config, num_labels=2, label_names=table.LABEL_NAMES)


def check_row(row, name, examples, steps):
    assert row["row"] == name and row["model"] == table.TITLES[name]
    assert (row["examples"], row["steps"]) == (examples, steps)
    assert 0 <= row["accuracy"] <= 1 and row["seconds"] >= 0 and row["cpu_seconds"] >= 0


def test_majority_and_bag_of_words_rows():
    row = table.majority_row(TRAIN[:3], TEST)
    check_row(row, "majority", 3, 0)
    assert row["accuracy"] == 0.5  # always "fresh": right on one of the two
    row = table.bag_of_words_row(TRAIN, TEST)
    check_row(row, "bag_of_words", 16, table.BAG_OF_WORDS_RECIPE["steps"])
    assert row["accuracy"] == 1.0  # the test reviews reuse the training words


def test_frozen_probe_and_fine_tuned_rows(tok):
    encoder = small_classifier(tok).bert.eval()
    before = [p.clone() for p in encoder.parameters()]
    check_row(table.frozen_probe_row(encoder, tok, TRAIN, TEST), "minilm_frozen", 16, table.PROBE_RECIPE["steps"])
    assert all(torch.equal(a, b) for a, b in zip(before, encoder.parameters(), strict=True))  # frozen
    model = small_classifier(tok)
    recipe = {"epochs": 2, "batch_size": 8, "lr": 1e-3}
    check_row(table.fine_tuned_row(model, tok, TRAIN, TEST, recipe, "minilm_fine_tuned"), "minilm_fine_tuned", 16, 4)


def test_tiny_rows_start_from_the_checkpoint_and_from_random_weights(tmp_path):
    texts = [text for text, _ in TRAIN] * 3
    tokenizer = train_wordpiece(texts, tmp_path / "model", vocab_size=60, min_frequency=1)
    torch.manual_seed(1)
    BertForPreTraining(tiny_config(tokenizer.vocab_size)).save_pretrained(tmp_path / "model")
    assert table.tiny_folder_ready(tmp_path)
    assert table.pretrained_tiny(tmp_path, steps=1) == tmp_path / "model"  # reused, not pretrained again
    original = dict(table.TINY_RECIPE)
    table.TINY_RECIPE.update(epochs=1, batch_size=8)
    try:
        pretrained, random = table.tiny_rows(tmp_path / "model", TRAIN, TEST)
    finally:
        table.TINY_RECIPE.update(original)
    check_row(pretrained, "tiny_pretrained", 16, 2)
    check_row(random, "tiny_random", 16, 2)


def test_the_script_writes_and_merges_its_table(tmp_path, capsys):
    output = tmp_path / "table.json"
    kept = {"row": "tiny_random", "model": "kept", "examples": 1, "steps": 1, "seconds": 0.0, "accuracy": 0.5}
    output.write_text(json.dumps({"rows": [kept]}))
    written = table.main(["--rows", "bag_of_words", "majority", "--examples", "16", "--output", str(output)])
    assert [row["row"] for row in written["rows"]] == ["majority", "bag_of_words", "tiny_random"]  # in ROWS order
    assert written["rows"][-1] == kept
    assert json.loads(output.read_text()) == written
    assert written["test_examples"] == 1275 and written["machine"]["cpus"] >= 1
    assert "bag-of-words logistic regression" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"unknown rows \['nope'\]"):
        table.run(["nope"])


def test_the_committed_table_has_every_row_of_the_notebook():
    committed = table.load_table()
    rows = {row["row"]: row for row in committed["rows"]}
    assert set(table.ROWS) - {"minilm_fine_tuned_all"} <= set(rows)
    assert committed["test_examples"] == 1275
    for name, row in rows.items():
        assert row["model"] == table.TITLES[name] and 0.5 < row["accuracy"] < 1
    text = table.format_table(committed["rows"])
    assert text.splitlines()[0].split() == ["model", "examples", "steps", "seconds", "CPU", "s", "accuracy"]
    with pytest.raises(FileNotFoundError, match=r"run `python -m bertcourse.finetuning_table`"):
        table.load_table("missing.json")
