"""The explorers of notebook 08, driven from Python: what they draw is exactly the model's values, a new
sentence redraws, and bad input is a message in the widget, never an exception."""

import math
import time

import ipywidgets as widgets
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from matplotlib.colors import same_color
from matplotlib.patches import Rectangle
from torch.testing import assert_close

import bertcourse as bc
from bertcourse import inside
from bertcourse.widgets import ModelViewExplorer, NeuronViewExplorer
from bertcourse.widgets._base import DEFAULT_TEXT, NOTHING_TO_DRAW
from bertcourse.widgets.inside import heads_mosaic

matplotlib.use("Agg")

pytestmark = [
    pytest.mark.filterwarnings("ignore:FigureCanvasAgg is non-interactive:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `ipykernel.comm.Comm` class has been deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`ipykernel.pylab.backend_inline` is deprecated:DeprecationWarning"),
]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
TEXT = "The dog chased the ball across the garden."
ERROR_COLOUR = "#a50f15"  # message_figure's red
MARK = "#ff5a1f"  # the chosen key's bar


@pytest.fixture(scope="module")
def pretrained():
    return bc.load_pretrained()


@pytest.fixture
def model_view(pretrained):
    return ModelViewExplorer(*pretrained, text=TEXT)


@pytest.fixture
def neuron(pretrained):
    return NeuronViewExplorer(*pretrained, text=TEXT, layer=0, head=2, query=3)


def model_maps(pretrained, text):
    model, tok = pretrained
    batch = tok(text)
    with torch.no_grad():
        out = model(**batch, output_attentions=True)
    return tok.convert_ids_to_tokens(batch["input_ids"][0]), torch.stack(out.attentions)[:, 0]


def images(figure):
    return [np.asarray(image.get_array()) for ax in figure.axes for image in ax.images]


def count_forward_calls(model):
    calls = []
    return calls, model.register_forward_hook(lambda *args: calls.append(1))


# --- ModelViewExplorer ------------------------------------------------------------------------------------


def test_model_view_draws_every_head_and_enlarges_the_chosen_one(pretrained, model_view):
    tokens, maps = model_maps(pretrained, TEXT)
    model_view.layer.value, model_view.head.value = 4, 5
    drawn = model_view.drawn
    assert drawn["message"] is None
    assert drawn["tokens"] == tokens
    assert_close(drawn["maps"], maps)
    assert_close(drawn["matrix"], maps[4, 5])
    assert (drawn["layer"], drawn["head"], drawn["title"]) == (4, 5, "layer 4, head 5")
    grid, enlarged = images(drawn["figure"])
    np.testing.assert_array_equal(np.ma.filled(grid, np.nan), drawn["mosaic"])
    np.testing.assert_allclose(enlarged, maps[4, 5].numpy(), rtol=1e-6)
    ax_grid, ax_head = drawn["figure"].axes[:2]
    assert [t.get_text() for t in ax_head.get_yticklabels()] == tokens
    assert [t.get_text() for t in ax_head.get_xticklabels()] == tokens
    assert [image.get_clim() for ax in (ax_grid, ax_head) for image in ax.images] == [(0.0, 1.0), (0.0, 1.0)]
    assert [t.get_text() for t in ax_grid.get_xticklabels()] == [str(h) for h in range(12)]
    assert [t.get_text() for t in ax_grid.get_yticklabels()] == [str(layer) for layer in range(6)]


def test_the_mosaic_holds_each_map_in_its_place():
    maps = torch.rand(2, 3, 4, 4)
    mosaic, gap = heads_mosaic(maps)
    step = 4 + gap
    assert gap == 1 and mosaic.shape == (2 * step - gap, 3 * step - gap)
    for layer in range(2):
        for head in range(3):
            block = mosaic[layer * step : layer * step + 4, head * step : head * step + 4]
            np.testing.assert_allclose(block, maps[layer, head].numpy())
    assert np.isnan(mosaic[4]).all() and np.isnan(mosaic[:, 4]).all()  # the gaps


def test_the_chosen_head_is_framed_in_the_grid(model_view):
    model_view.layer.value, model_view.head.value = 2, 7
    (frame,) = [p for p in model_view.drawn["figure"].axes[0].patches if isinstance(p, Rectangle)]
    seq = len(model_view.drawn["tokens"])
    _, gap = heads_mosaic(model_view.drawn["maps"])
    x, y = frame.get_xy()
    assert (x, y) == (7 * (seq + gap) - 0.5 - gap / 2, 2 * (seq + gap) - 0.5 - gap / 2)
    assert frame.get_width() == frame.get_height() == seq + gap


def test_typing_a_sentence_runs_the_model_once_and_redraws(pretrained):
    model, tok = pretrained
    calls, hook = count_forward_calls(model)
    try:
        explorer = ModelViewExplorer(model, tok, text="A short one.")
        first = images(explorer.drawn["figure"])[1]
        started = time.perf_counter()
        explorer.text.value = "Another, longer sentence for the model view."
        took = time.perf_counter() - started
        explorer.head.value = 3
        explorer.layer.value = 1
        explorer.text.value = "A short one."
        assert len(calls) == 2  # one run per sentence; the sliders and a known sentence reuse the maps
    finally:
        hook.remove()
    explorer.text.value = "Another, longer sentence for the model view."
    assert explorer.drawn["tokens"][:3] == ["[CLS]", "another", ","]
    assert images(explorer.drawn["figure"])[1].shape != first.shape
    assert took < 10.0  # about a second on a laptop; generous for a loaded test machine


def test_a_long_sentence_labels_every_few_tokens(pretrained):
    text = " ".join(["word"] * 100)
    explorer = ModelViewExplorer(*pretrained, text=text)
    labels = [t.get_text() for t in explorer.drawn["figure"].axes[1].get_yticklabels()]
    assert 20 <= len(labels) <= 40


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "`text` is empty: type a sentence."),
        ("word " * 600, "`text` has 602 tokens with [CLS] and [SEP], but the model has learned positions for 512"),
    ],
)
def test_model_view_answers_bad_sentences_with_a_message(model_view, text, message):
    model_view.text.value = text
    drawn = model_view.drawn
    assert drawn["message"].startswith(message)
    assert drawn["matrix"] is None
    said = drawn["figure"].axes[0].texts[0]
    assert message in said.get_text().replace("\n", " ") and same_color(said.get_color(), ERROR_COLOUR)
    assert drawn["title"] == NOTHING_TO_DRAW
    assert not any(isinstance(row, widgets.HTML) for row in model_view.widget.children)  # said once, in the picture
    model_view.text.value = TEXT  # and it recovers
    assert model_view.drawn["message"] is None


def test_model_view_answers_a_layer_the_model_does_not_have_with_a_message(model_view):
    model_view.layer.max = 9
    model_view.layer.value = 7
    assert model_view.drawn["message"] == "`layer` must be from 0 to 5 (the model has 6 layers), got 7."
    model_view.head.max = 20
    model_view.layer.value = 1
    model_view.head.value = 15
    assert model_view.drawn["message"] == "`head` must be from 0 to 11 (the model has 12 heads), got 15."


# --- NeuronViewExplorer -----------------------------------------------------------------------------------


def test_neuron_view_draws_the_heads_own_vectors(pretrained, neuron):
    _, maps = model_maps(pretrained, TEXT)
    view = inside.neuron_view(*pretrained, TEXT, 0, 2)
    drawn = neuron.drawn
    assert drawn["message"] is None
    assert (drawn["query"], drawn["key"]) == (3, int(maps[0, 2, 3].argmax())) == (3, 2)  # 'chased' -> 'dog'
    assert_close(drawn["q"], view.q[3])
    assert_close(drawn["k"], view.k[2])
    assert_close(drawn["product"], view.q[3] * view.k[2])
    assert_close(drawn["matrix"], torch.stack([view.q[3], view.k[2], view.q[3] * view.k[2]]))
    assert drawn["score"] == pytest.approx(float(drawn["product"].sum()) / math.sqrt(32), abs=1e-5)
    assert_close(drawn["weights"], maps[0, 2, 3], atol=1e-5, rtol=1e-5)
    assert drawn["title"] == "layer 0, head 2: query 3 'chased', key 2 'dog'"
    (vectors,) = images(drawn["figure"])
    np.testing.assert_allclose(vectors, torch.stack([view.q[3], view.k[2]]).numpy(), rtol=1e-6)
    bars = [p.get_height() for p in drawn["figure"].axes[3].patches]
    np.testing.assert_allclose(bars, drawn["weights"].numpy(), rtol=1e-6)
    marked = [i for i, bar in enumerate(drawn["figure"].axes[3].patches) if same_color(bar.get_facecolor(), MARK)]
    assert marked == [2]


def test_neuron_view_controls_move_the_picture(neuron):
    neuron.key.value = 0
    assert neuron.drawn["key"] == 0 and neuron.drawn["title"].endswith("key 0 '[CLS]'")
    neuron.head.value = 5
    neuron.query.value = 7
    assert (neuron.drawn["head"], neuron.drawn["query"]) == (5, 7)


def test_the_basis_switch_draws_the_heads_own_directions_with_the_same_score(pretrained):
    explorer = NeuronViewExplorer(*pretrained, text=TEXT, layer=0, head=2, query=3)
    score = explorer.drawn["score"]
    view = inside.neuron_view(*pretrained, TEXT, 0, 2)
    explorer.basis.value = "directions"
    drawn = explorer.drawn
    assert drawn["basis"] == "directions" and drawn["message"] is None
    assert_close(drawn["q"], view.q_directions[3])
    assert_close(drawn["k"], view.k_directions[2])
    assert_close(drawn["product"], view.q_directions[3] * view.k_directions[2])
    assert drawn["score"] == pytest.approx(score, abs=1e-3)
    (vectors,) = images(drawn["figure"])
    np.testing.assert_allclose(vectors, torch.stack([view.q_directions[3], view.k_directions[2]]).numpy(), rtol=1e-6)
    assert drawn["figure"].axes[0].get_xlabel().startswith("direction of W_Q W_K^T")
    explorer.basis.value = "dimensions"
    assert_close(explorer.drawn["q"], view.q[3])
    with pytest.raises(ValueError, match="`basis` must be one of"):
        NeuronViewExplorer(*pretrained, basis="eigen")


def test_a_new_sentence_gives_the_token_lists_its_tokens_and_draws_once(neuron):
    draws = []
    original = neuron._draw
    neuron._draw = lambda **values: draws.append(values) or original(**values)
    neuron.query.value, neuron.key.value = 9, 10
    draws.clear()
    neuron.text.value = "Hi there."
    assert len(draws) == 1
    assert [label for label, _ in neuron.query.options] == ["0: [CLS]", "1: hi", "2: there", "3: .", "4: [SEP]"]
    assert (neuron.query.value, neuron.key.value) == (4, 4)  # past the end: the last token
    assert (neuron.drawn["query"], neuron.drawn["key"]) == (4, 4)


def test_neuron_view_computes_each_head_once_per_sentence(pretrained):
    model, tok = pretrained
    calls, hook = count_forward_calls(model.embeddings)
    try:
        explorer = NeuronViewExplorer(model, tok, text=TEXT, layer=2, head=4)
        explorer.query.value, explorer.key.value = 5, 1  # the same head: its vectors are kept
        explorer.head.value = 5
        explorer.head.value = 4
        assert len(calls) == 2  # (TEXT, 2, 4) and (TEXT, 2, 5)
    finally:
        hook.remove()


def test_neuron_view_answers_bad_input_with_a_message(neuron):
    options = neuron.query.options
    neuron.text.value = ""
    assert neuron.drawn["message"] == "`text` is empty: type a sentence."
    assert neuron.query.options == options  # the lists wait for a sentence
    neuron.text.value = TEXT
    neuron.layer.max = 8
    neuron.layer.value = 6
    assert neuron.drawn["message"] == "`layer` must be from 0 to 5 (the model has 6 layers), got 6."
    assert same_color(neuron.drawn["figure"].axes[0].texts[0].get_color(), ERROR_COLOUR)


# --- both -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda m, t: ModelViewExplorer(m, t, layer=6), r"`layer` must be an int from 0 to 5, got 6"),
        (lambda m, t: ModelViewExplorer(m, t, head=12), r"`head` must be an int from 0 to 11, got 12"),
        (lambda m, t: NeuronViewExplorer(m, t, layer=-1), r"`layer` must be an int from 0 to 5, got -1"),
        (lambda m, t: NeuronViewExplorer(m, t, query=99), r"`query` must be an int from 0 to 12, got 99"),
        (lambda m, t: NeuronViewExplorer(m, t, key=13), r"`key` must be an int from 0 to 12, got 13"),
        (lambda m, t: NeuronViewExplorer(m, t, text=""), r"`text` is empty"),
        (lambda m, t: ModelViewExplorer(bc.BertModel(m.config), t), r"training mode.*model.eval\(\)"),
        (lambda m, t: ModelViewExplorer(torch.nn.Linear(2, 2), t), r"must be a bertcourse BertModel"),
    ],
)
def test_initial_values_the_controls_cannot_show_are_errors(pretrained, make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make(*pretrained)


def test_the_default_sentence_is_the_courses(pretrained):
    assert ModelViewExplorer(*pretrained).text.value == DEFAULT_TEXT
    assert NeuronViewExplorer(*pretrained).text.value == DEFAULT_TEXT


@pytest.fixture
def ipython_shell(tmp_path, monkeypatch):
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    shell = InteractiveShell.instance()
    yield shell
    InteractiveShell.clear_instance()


def test_each_explorer_shows_its_widget_and_closes_its_figures(model_view, neuron, ipython_shell):
    for explorer in (model_view, neuron):
        ipython_shell.user_ns["explorer"] = explorer
        with capture_output() as captured:
            ipython_shell.run_cell("explorer")
        assert [output.data[WIDGET_VIEW]["model_id"] for output in captured.outputs] == [explorer.widget.model_id]
    plt.close("all")
    model_view.head.value = 9
    model_view.text.value = ""
    neuron.head.value = 9
    neuron.text.value = "Another one."
    assert plt.get_fignums() == []
