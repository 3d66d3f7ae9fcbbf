"""The explorers of notebook 09, driven from Python: fill-mask shows the model's own top 5, the masking
explorer shows exactly what mask_tokens does, and bad input is a message in the widget, never an exception."""

import ipywidgets as widgets
import matplotlib
import numpy as np
import pytest
import torch

import bertcourse as bc
from bertcourse.pretraining import SpecialIds, fill_mask, masking_view, tiny_config, train_wordpiece
from bertcourse.widgets import FillMaskExplorer, MLMMaskingExplorer

matplotlib.use("Agg")

pytestmark = [
    pytest.mark.filterwarnings("ignore:FigureCanvasAgg is non-interactive:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `ipykernel.comm.Comm` class has been deprecated:DeprecationWarning"),
]

TEXTS = [
    "The film is a quiet drama about a young woman who returns to her home town.",
    "A detective finds the old house empty and nobody remembers his name.",
    "This movie is funny, warm and far too long.",
] * 4


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return train_wordpiece(TEXTS, tmp_path_factory.mktemp("vocab"), vocab_size=150, min_frequency=1)


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    return bc.BertForPreTraining(tiny_config(tokenizer.vocab_size, max_length=32)).train()


def test_fill_mask_gives_the_top_5_for_each_mask_and_leaves_the_model_as_it_was(model, tokenizer):
    text = "the film is a [MASK] about a [MASK] woman."
    predictions = fill_mask(model, tokenizer, text)
    assert len(predictions) == 2 and all(len(guesses) == 5 for guesses in predictions)
    assert model.training, "the mode is given back"
    batch = tokenizer([text])
    model.eval()
    with torch.no_grad():
        logits = model(batch["input_ids"]).prediction_logits[0]
    model.train()
    where = (batch["input_ids"][0] == SpecialIds.from_tokenizer(tokenizer).mask).nonzero().flatten()
    for guesses, position in zip(predictions, where.tolist(), strict=True):
        probabilities = logits[position].softmax(-1)
        best = probabilities.topk(5)
        assert [t for t, _ in guesses] == tokenizer.convert_ids_to_tokens(best.indices.tolist())
        np.testing.assert_allclose([p for _, p in guesses], best.values.tolist(), rtol=1e-6)


def test_fill_mask_explorer_draws_the_predictions(model, tokenizer):
    explorer = FillMaskExplorer(model, tokenizer)
    explorer.text.value = "a [MASK] finds the old house."
    assert explorer.drawn["message"] is None
    assert explorer.drawn["predictions"] == fill_mask(model, tokenizer, "a [MASK] finds the old house.")
    assert explorer.drawn["matrix"].shape == (1, 5)
    assert len(explorer.drawn["figure"].axes) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("the film is long.", "The sentence has no [MASK]: put [MASK] where the model should guess a word."),
        ("the film is [mask].", "Write it in capitals: [MASK]."),
        ("", "The sentence is empty: type a sentence."),
        ("[MASK] " * 5, "The sentence has 5 [MASK]s; this explorer shows at most 4."),
        ("the film " * 40 + "[MASK]", "this model reads at most 32."),
    ],
)
def test_fill_mask_explorer_answers_bad_input_with_a_message(model, tokenizer, text, message):
    explorer = FillMaskExplorer(model, tokenizer)
    explorer.text.value = text
    assert message in explorer.drawn["message"]
    assert "`text`" not in explorer.drawn["message"], "the box is called 'sentence'"
    assert explorer.text.description == "sentence (then Enter)"  # the box redraws on Enter, and says so
    assert explorer.drawn["matrix"] is None
    said_once(explorer)


def said_once(explorer):
    """The message is in the figure, where the picture would be, and nowhere else in the widget."""
    (ax,) = explorer.drawn["figure"].axes
    shown = " ".join(" ".join(t.get_text() for t in ax.texts).split())
    assert explorer.drawn["message"] == shown
    assert not [child for child in explorer.widget.children if isinstance(child, widgets.HTML)]


def test_fill_mask_needs_the_mlm_head(tokenizer):
    with pytest.raises(TypeError, match="BertForPreTraining"):
        FillMaskExplorer(bc.BertModel(tiny_config(tokenizer.vocab_size)), tokenizer)
    with pytest.raises(TypeError, match="BertForPreTraining"):
        fill_mask(bc.BertModel(tiny_config(tokenizer.vocab_size)), tokenizer, "a [MASK].")


def test_masking_view_follows_mask_tokens(tokenizer):
    text = "A detective finds the old house empty and nobody remembers his name."
    view = masking_view(tokenizer, text, seed=3, probability=0.5)
    assert view.tokens == tokenizer.tokenize(text)
    assert view.kinds[0] == view.kinds[-1] == "not selected", "[CLS] and [SEP] are never selected"
    for token, seen, label, kind in zip(view.tokens, view.seen, view.labels, view.kinds, strict=True):
        assert (label is None) == (kind == "not selected")
        if kind in ("not selected", "kept"):
            assert seen == token
        elif kind == "[MASK]":
            assert seen == "[MASK]" and label == token
        else:
            assert seen != token and seen not in ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")
    every = masking_view(tokenizer, text, probability=1.0)
    assert every.kinds.count("not selected") == 2
    assert masking_view(tokenizer, text, seed=3, probability=0.5) == view, "seeded"


def test_masking_explorer_redraws_with_the_seed_and_the_probability(tokenizer):
    explorer = MLMMaskingExplorer(tokenizer, seed=0)
    first = explorer.drawn["view"]
    assert first == masking_view(tokenizer, explorer.text.value, seed=0, probability=0.15)
    seen = {tuple(first.kinds)}
    for seed in range(1, 6):
        explorer.seed.value = seed
        seen.add(tuple(explorer.drawn["view"].kinds))
    assert len(seen) > 1, "another seed, another masking"
    explorer.probability.value = 0.0
    assert explorer.drawn["matrix"].sum() == 0 and "0 of" in explorer.drawn["title"]
    explorer.probability.value = 1.0
    assert explorer.drawn["matrix"][0].sum() == len(explorer.drawn["view"].tokens) - 2
    explorer.text.value = "film"
    assert explorer.drawn["view"].tokens == ["[CLS]", "film", "[SEP]"]
    assert " of 1 token selected" in explorer.drawn["title"], explorer.drawn["title"]
    explorer.text.value = "  "
    assert explorer.drawn["message"] == "The sentence is empty: type a sentence."
    said_once(explorer)


def test_masking_explorer_refuses_impossible_starting_values(tokenizer):
    with pytest.raises(ValueError, match="`seed` must be an int from 0 to 99"):
        MLMMaskingExplorer(tokenizer, seed=100)
    with pytest.raises(ValueError, match="`probability` must be a number from 0 to 1"):
        MLMMaskingExplorer(tokenizer, probability=1.5)


def test_the_masking_table_labels_are_readable_where_it_is_shown(tokenizer):
    """Labels of at least 9 pt (12.5 px at matplotlib's 100 dpi), on a figure narrow enough (tokens wrapped into
    lines) that JupyterLab shows it at its own size; ``tests/test_browser_explorers.py`` measures it shown."""
    explorer = MLMMaskingExplorer(tokenizer, text="a detective returns to his home town and finds the old house. " * 2)
    figure = explorer.drawn["figure"]
    texts = [t for t in figure.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
    assert min(t.get_fontsize() for t in texts) >= 9
    assert figure.get_size_inches()[0] * figure.dpi <= 960
