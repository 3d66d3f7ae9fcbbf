"""SaliencyExplorer (notebook 10): the scores drawn are the package's, the probability is the model's, both
methods and a typed review redraw, and bad input is a message in the figure instead of an exception."""

import ipywidgets as widgets
import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

import bertcourse as bc
from bertcourse.finetuning import BertForSequenceClassification, gradient_x_input, occlusion
from bertcourse.widgets.finetuning import METHODS, SaliencyExplorer

matplotlib.use("Agg")

pytestmark = [
    pytest.mark.filterwarnings("ignore:FigureCanvasAgg is non-interactive:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `ipykernel.comm.Comm` class has been deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`ipykernel.pylab.backend_inline` is deprecated:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def tok():
    return bc.WordPieceTokenizer.from_folder(bc.pretrained.default_weights_dir())


@pytest.fixture(scope="module")
def model(tok):
    config = bc.BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    classifier = BertForSequenceClassification(config, num_labels=2, label_names=["rotten", "fresh"])
    with torch.no_grad():
        for p in classifier.parameters():
            p.normal_(0, 0.2)
    return classifier.train()


def test_the_explorer_draws_the_packages_scores_and_the_models_probability(tok, model):
    explorer = SaliencyExplorer(model, tok)
    drawn = explorer.drawn
    batch = tok(explorer.text.value)
    assert drawn["message"] is None
    assert drawn["tokens"] == tok.tokenize(explorer.text.value)[1:-1]
    torch.testing.assert_close(drawn["matrix"], gradient_x_input(model, batch, 1)[0, 1:-1])
    model.eval()
    with torch.no_grad():
        p = model(**batch).logits.softmax(-1)[0]
    model.train()
    assert abs(drawn["probability"] - float(p[1])) < 1e-6
    assert drawn["predicted"] == ["rotten", "fresh"][int(p.argmax())]
    assert drawn["title"].startswith(f"P(fresh) = {float(p[1]):.2f}, predicted: {drawn['predicted']}")
    assert model.training  # the explorer gives the model its mode back
    assert len(drawn["figure"].axes[0].texts) == len(drawn["tokens"])
    assert plt.fignum_exists(drawn["figure"].number) is False  # closed after it was shown


def test_the_review_box_redraws_on_enter(tok, model):
    """The notebook says "type a review and press Enter": a one-line Text box sends its value on Enter
    (and when it loses focus) with continuous_update=False; a Textarea would take Enter as a newline."""
    explorer = SaliencyExplorer(model, tok)
    assert type(explorer.text) is widgets.Text and explorer.text.continuous_update is False
    assert explorer.text.description == "review"


def test_switching_the_method_and_typing_a_review_redraws(tok, model):
    explorer = SaliencyExplorer(model, tok, target=0)
    explorer.method.value = METHODS[1]
    explorer.text.value = "Dull, dull, dull."
    batch = tok("Dull, dull, dull.")
    torch.testing.assert_close(explorer.drawn["matrix"], occlusion(model, batch, 0)[1:-1])
    assert explorer.drawn["tokens"] == ["dull", ",", "dull", ",", "dull", "."]
    assert explorer.drawn["title"].startswith("P(rotten) = ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("   ", "Type a review first: the box is empty."),
        ("word " * 90, "The review has 90 word pieces; this explorer draws at most 80: shorten it."),
    ],
)
def test_bad_input_shows_a_message_in_the_figure(tok, model, text, message):
    explorer = SaliencyExplorer(model, tok)
    explorer.text.value = text
    drawn = explorer.drawn
    assert drawn["message"] == message and drawn["matrix"] is None and drawn["title"] == "nothing to draw"
    assert drawn["figure"].axes[0].texts[0].get_text().replace("\n", " ") == message  # wrapped at 90
    explorer.text.value = "Back to a short review."
    assert explorer.drawn["message"] is None


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"method": "attention"}, ValueError, r"`method` must be one of"),
        ({"target": 2}, ValueError, r"`target` must be a class index 0..1 \(rotten, fresh\), got 2"),
    ],
)
def test_bad_settings_are_errors(tok, model, kwargs, error, match):
    with pytest.raises(error, match=match):
        SaliencyExplorer(model, tok, **kwargs)


def test_a_model_that_is_not_a_classifier_is_refused(tok):
    with pytest.raises(TypeError, match=r"`model` must be a BertForSequenceClassification, got BertModel"):
        SaliencyExplorer(
            bc.BertModel(
                bc.BertConfig(
                    vocab_size=tok.vocab_size,
                    hidden_size=32,
                    num_hidden_layers=1,
                    num_attention_heads=2,
                    intermediate_size=64,
                )
            ),
            tok,
        )
