"""bertcourse.finetuning.table: each row's function on tiny data, the learning rate chosen on dev and reported on
test over seeds, the tiny-BERT rows on a shipped-run folder, the script writing and merging its JSON, and the
committed table the notebook prints."""

from __future__ import annotations

import json
import statistics

import pytest
import torch

import bertcourse as bc
from bertcourse.finetuning import BertForSequenceClassification, table
from bertcourse.heads import BertForPreTraining
from bertcourse.pretraining import SHIPPED_RUN, tiny_config, train_wordpiece

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


def small_config(tok):
    return bc.BertConfig(
        vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )


def small_classifier(tok):
    torch.manual_seed(0)
    return BertForSequenceClassification(small_config(tok), num_labels=2, label_names=table.LABEL_NAMES)


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
    row = table.fine_tuned_row(model, tok, TRAIN, TEST, recipe, "minilm_fine_tuned")
    check_row(row, "minilm_fine_tuned", 16, 4)
    assert row["lr"] == 1e-3


def test_fine_tune_records_a_dev_curve(tok):
    model = small_classifier(tok)
    dev = table.review_batches(TEST, tok)
    history = table.fine_tune(model, tok, TRAIN, epochs=2, batch_size=8, lr=1e-3, eval_batches=dev, eval_every=2)
    assert history.step == 4 and [e["step"] for e in history.evals] == [0, 2, 4]
    assert all({"loss", "accuracy"} <= set(e) for e in history.evals)


@pytest.mark.parametrize("every_seed_every_rate", [True, False])
def test_the_rate_is_chosen_on_dev_and_reported_on_test_over_the_seeds(tok, every_seed_every_rate, capsys):
    config = small_config(tok)
    row = table.chosen_on_dev_row(
        "tiny_random",
        lambda seed: table.random_classifier(config, seed),
        tok,
        TRAIN,
        TEST[:1] + TRAIN[:3],  # dev
        TEST,
        recipe={"epochs": 1, "batch_size": 8, "max_length": 48},
        rates=(1e-3, 3e-3),
        seeds=(0, 1, 2),
        every_seed_every_rate=every_seed_every_rate,
    )
    check_row(row, "tiny_random", 16, 2)
    chosen = table.rate_key(row["lr"])
    assert set(row["dev_accuracy"]) == {"1e-03", "3e-03"} and set(row["dev_accuracy"][chosen]) == {"0", "1", "2"}
    first = {key: values["0"] for key, values in row["dev_accuracy"].items()}
    if not every_seed_every_rate:  # the rates compete on the first seed
        assert first[chosen] == max(first.values()) and row["runs"] == 4
    else:
        assert row["runs"] == 6
    assert row["seeds"] == [0, 1, 2] and len(row["test_accuracies"]) == 3
    assert row["accuracy"] == pytest.approx(statistics.fmean(row["test_accuracies"]), abs=1e-4)
    assert row["accuracy_min"] == min(row["test_accuracies"]) and row["accuracy_max"] == max(row["test_accuracies"])
    assert "accuracy_std" in row and row["recipe"]["epochs"] == 1
    assert "tiny_random: lr 1e-03, seed 0: dev accuracy" in capsys.readouterr().out


def test_the_pretrained_and_the_random_classifier_share_their_head(tok):
    config = small_config(tok)
    torch.manual_seed(5)
    encoder = bc.BertModel(config)
    pretrained, random = table.pretrained_classifier(encoder, seed=3), table.random_classifier(config, seed=3)
    assert torch.equal(pretrained.classifier.weight, random.classifier.weight)
    for name, value in encoder.state_dict().items():
        assert torch.equal(pretrained.bert.state_dict()[name], value)
    assert not torch.equal(
        pretrained.bert.embeddings.word_embeddings.weight, random.bert.embeddings.word_embeddings.weight
    )


def fake_shipped_run(folder):
    texts = [text for text, _ in TRAIN] * 3
    tokenizer = train_wordpiece(texts, folder, vocab_size=60, min_frequency=1)
    torch.manual_seed(1)
    BertForPreTraining(tiny_config(tokenizer.vocab_size)).save_pretrained(folder)
    held_out = {"model": {"mask_loss": 6.1}, "baselines": {"mask_unigram_loss": 6.5}}
    (folder / "run.json").write_text(json.dumps({"recipe": {"steps": 7}, "seconds": 1.5, "held_out": held_out}))
    return folder


def test_tiny_rows_start_from_the_shipped_run_and_from_random_weights(tmp_path, monkeypatch):
    folder = fake_shipped_run(tmp_path / "tiny")
    monkeypatch.setattr(table, "SCRATCH_RECIPE", {"epochs": 1, "batch_size": 8, "max_length": 48})
    monkeypatch.setitem(table.RATES, "tiny_pretrained", (1e-3,))
    monkeypatch.setitem(table.RATES, "tiny_random", (1e-3,))
    pretrained, random = table.tiny_rows(folder, TRAIN, TEST, TEST, seeds=(0, 1))
    check_row(pretrained, "tiny_pretrained", 16, 2)
    check_row(random, "tiny_random", 16, 2)
    assert pretrained["pretraining"] == {"steps": 7, "seconds": 1.5, "mask_loss": 6.1, "mask_unigram_loss": 6.5}
    assert "pretraining" not in random
    assert pretrained["vocabulary"] == random["vocabulary"] == {"size": 60, "sha256": table.vocabulary_hash(folder)}
    frozen, frozen_random = table.tiny_frozen_rows(folder, TRAIN, TEST, seeds=(0, 1))
    check_row(frozen, "tiny_pretrained_frozen", 16, table.PROBE_RECIPE["steps"])
    check_row(frozen_random, "tiny_random_frozen", 16, table.PROBE_RECIPE["steps"])
    assert len(frozen["test_accuracies"]) == 2 and frozen["vocabulary"] == pretrained["vocabulary"]


def test_the_script_writes_and_merges_its_table(tmp_path, capsys):
    output = tmp_path / "table.json"
    kept = {"row": "tiny_random", "model": "kept", "examples": 1, "steps": 1, "seconds": 0.0, "accuracy": 0.5}
    former = {"cpus": 64, "torch_threads": 8}
    output.write_text(json.dumps({"rows": [kept], "machine": former}))
    written = table.main(["--rows", "bag_of_words", "majority", "--examples", "16", "--output", str(output)])
    assert [row["row"] for row in written["rows"]] == ["majority", "bag_of_words", "tiny_random"]  # in ROWS order
    assert written["rows"][-1] == {**kept, "machine": former}  # a kept row keeps the machine it was computed on
    assert "machine" not in written and all(row["machine"]["cpus"] >= 1 for row in written["rows"][:2])
    assert all(len(row["date"]) == 10 for row in written["rows"][:2])
    assert json.loads(output.read_text()) == written
    assert written["test_examples"] == 1275
    out = capsys.readouterr().out
    assert "bag-of-words logistic regression" in out and "computed bag_of_words, majority in" in out
    with pytest.raises(ValueError, match=r"unknown rows \['nope'\]"):
        table.run(["nope"])


def test_the_label_curve_trains_both_baselines_on_the_same_nested_subsets():
    features = torch.tensor([[1.0, 0.0] if y else [0.0, 1.0] for _, y in TRAIN])  # (16, 2): the label, readable
    dev_features = torch.tensor([[1.0, 0.0] if y else [0.0, 1.0] for _, y in TEST])  # (2, 2)
    curve = table.label_curve(features, TRAIN, dev_features, TEST, sizes=(4, 16), subsets=2)
    assert list(curve) == [4, 16] and all(len(v) == 2 for sizes in curve.values() for v in sizes.values())
    assert curve[16]["probe"] == [1.0, 1.0] and curve[16]["bag_of_words"] == [1.0, 1.0]  # every review: learnable
    assert all(0 <= a <= 1 for a in curve[4]["bag_of_words"] + curve[4]["probe"])
    with pytest.raises(ValueError, match=r"one feature row per example: 2 rows for 16 examples"):
        table.label_curve(features[:2], TRAIN, dev_features, TEST)
    with pytest.raises(ValueError, match=r"`sizes` must be between 1 and 16"):
        table.label_curve(features, TRAIN, dev_features, TEST, sizes=(32,))


def test_choose_on_dev_averages_each_rate_over_its_seeds():
    runs = [
        {"lr": 1e-3, "seed": 0, "dev": 0.80, "test": 0.70},  # the single best dev run, but a worse mean
        {"lr": 1e-3, "seed": 1, "dev": 0.60, "test": 0.72},
        {"lr": 3e-4, "seed": 0, "dev": 0.75, "test": 0.74},
        {"lr": 3e-4, "seed": 1, "dev": 0.74, "test": 0.76},
    ]
    assert table.choose_on_dev(runs) == (3e-4, pytest.approx(0.75))
    with pytest.raises(ValueError, match="non-empty list"):
        table.choose_on_dev([])


def test_the_committed_table_has_every_row_of_the_notebook():
    committed = table.load_table()
    rows = {row["row"]: row for row in committed["rows"]}
    assert set(table.ROWS) <= set(rows)
    assert committed["test_examples"] == 1275
    for name, row in rows.items():
        assert row["model"] == table.TITLES[name] and 0.5 < row["accuracy"] < 1
        assert row["machine"]["cpus"] >= 1
    for name in ("minilm_fine_tuned", *table.SEEDED_ROWS):
        row = rows[name]
        assert set(row["dev_accuracy"]) == {table.rate_key(lr) for lr in table.RATES[name]}
        assert row["lr"] in table.RATES[name]
        mean_dev = {key: statistics.fmean(values.values()) for key, values in row["dev_accuracy"].items()}
        first = {key: values[str(row["seeds"][0])] for key, values in row["dev_accuracy"].items()}
        chosen_on = mean_dev if row["selection"].startswith("every rate with every seed") else first
        assert chosen_on[table.rate_key(row["lr"])] == max(chosen_on.values())  # chosen on dev
        assert row["dev_mean"] == {key: pytest.approx(value, abs=1e-4) for key, value in mean_dev.items()}
    for name in table.SEEDED_ROWS:
        row = rows[name]
        assert row["seeds"][0] == 0 and len(row["test_accuracies"]) == len(row["seeds"])
        assert row["recipe"] == table.SCRATCH_RECIPE
    for name in ("tiny_pretrained", "tiny_random"):  # the comparison the notebook makes: three seeds at least
        assert len(rows[name]["seeds"]) >= 3
    assert rows["tiny_pretrained"]["vocabulary"] == rows["tiny_random"]["vocabulary"]
    assert rows["minilm_fine_tuned"]["lr"] == table.MINILM_RECIPE["lr"]  # the rate notebook 10 trains at
    text = table.format_table(committed["rows"])
    assert text.splitlines()[0].split() == [
        "model",
        "examples",
        "steps",
        "seconds",
        "CPU",
        "s",
        "lr",
        "accuracy",
        "over",
        "seeds",
    ]
    assert table.format_table(committed["rows"], seconds=False).splitlines()[0].split() == [
        "model",
        "examples",
        "steps",
        "lr",
        "accuracy",
        "over",
        "seeds",
    ]
    assert all(" - " not in line for line in text.splitlines() if "fine-tuned" in line)  # every such row has its rate
    with pytest.raises(FileNotFoundError, match=r"run `python -m bertcourse.finetuning.table`"):
        table.load_table("missing.json")


@pytest.mark.skipif(not (SHIPPED_RUN / "run.json").is_file(), reason="the shipped tiny BERT is not in this checkout")
def test_the_committed_tiny_rows_were_fine_tuned_from_the_shipped_run():
    rows = {row["row"]: row for row in table.load_table()["rows"]}
    record = json.loads((SHIPPED_RUN / "run.json").read_text())
    assert rows["tiny_pretrained"]["vocabulary"]["sha256"] == table.vocabulary_hash(SHIPPED_RUN)
    assert rows["tiny_pretrained"]["pretraining"]["steps"] == record["recipe"]["steps"]
