"""WindowExplorer (notebook 11): every control moved from Python, what was drawn checked against
bertcourse.long_inputs and, with the model, against the semantic search of section 3.5 (each window's
cosine with the query); bad settings shown as a message in the figure instead of an exception."""

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

import bertcourse as bc
from bertcourse import long_inputs as li
from bertcourse.pretrained import default_weights_dir
from bertcourse.widgets.long_inputs import WindowExplorer

matplotlib.use("Agg")

pytestmark = [
    pytest.mark.filterwarnings("ignore:FigureCanvasAgg is non-interactive:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `ipykernel.comm.Comm` class has been deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`ipykernel.pylab.backend_inline` is deprecated:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def tok():
    return bc.WordPieceTokenizer.from_folder(default_weights_dir())


@pytest.fixture(scope="module")
def model():
    return bc.load_pretrained()[0]


def cosine_panels(figure) -> int:
    """How many panels of the figure draw the windows' cosines (the map has a panel per slice of tokens)."""
    return sum(ax.get_xlabel() == "cosine with the query" for ax in figure.axes)


def test_with_the_model_each_window_gets_its_cosine_with_the_query(tok, model):
    explorer = WindowExplorer(tok, model, window=16, stride=12)
    drawn = explorer.drawn
    ids = li.content_ids(tok, explorer.text.value)
    with torch.no_grad():
        windows = bc.pooling.sentence_embeddings(model, li.window_batch(ids, drawn["spans"], tok))
        query = bc.pooling.sentence_embeddings(model, tok([explorer.query.value]))[0]
    torch.testing.assert_close(drawn["similarities"], windows @ query)
    assert drawn["best"] == int((windows @ query).argmax())
    assert cosine_panels(drawn["figure"]) == 1  # the windows, and the cosines beside them
    start, end = drawn["spans"][drawn["best"]].tolist()
    assert "yorick" in tok.decode(ids[start:end])  # "Who was the jester?" finds the jester's window
    assert drawn["title"].endswith(f"best window: {drawn['best']} (cosine {float(drawn['similarities'].max()):.2f})")
    explorer.query.value = "Hamlet pretends to be mad."
    assert not torch.equal(explorer.drawn["similarities"], drawn["similarities"])
    explorer.stride.value = 4
    assert explorer.drawn["similarities"].shape == (len(explorer.drawn["spans"]),)
    explorer.query.value = "  "
    assert explorer.drawn["similarities"] is None and explorer.drawn["best"] is None
    assert cosine_panels(explorer.drawn["figure"]) == 0


def test_without_the_model_there_is_no_query_box(tok):
    explorer = WindowExplorer(tok)
    assert not hasattr(explorer, "query") and explorer.drawn["similarities"] is None


def test_the_explorer_draws_the_packages_windows_and_owners(tok):
    explorer = WindowExplorer(tok, window=12, stride=8)
    drawn = explorer.drawn
    n_tokens = len(drawn["tokens"])
    assert drawn["message"] is None
    assert drawn["tokens"] == tok.convert_ids_to_tokens(li.content_ids(tok, explorer.text.value))
    assert torch.equal(drawn["spans"], li.window_spans(n_tokens, 12, 8))
    assert torch.equal(drawn["owner"], li.central_windows(drawn["spans"]))
    matrix = drawn["matrix"]
    assert matrix.shape == (len(drawn["spans"]), n_tokens)
    assert bool(((matrix == 2).sum(dim=0) == 1).all())  # each token's output comes from exactly one window
    for w, (start, end) in enumerate(drawn["spans"].tolist()):
        assert bool((matrix[w, start:end] > 0).all()) and not matrix[w, :start].any() and not matrix[w, end:].any()
    assert drawn["title"] == f"window 12, stride 8: {len(drawn['spans'])} windows over {n_tokens} tokens, overlap 4"
    assert plt.fignum_exists(drawn["figure"].number) is False  # closed after it was shown


def test_moving_the_sliders_and_typing_a_text_redraws(tok):
    explorer = WindowExplorer(tok, window=12, stride=8)
    explorer.window.value, explorer.stride.value = 6, 2
    assert torch.equal(explorer.drawn["spans"], li.window_spans(len(explorer.drawn["tokens"]), 6, 2))
    explorer.text.value = "To be, or not to be, that is the question."
    assert explorer.drawn["tokens"][:5] == ["to", "be", ",", "or", "not"]
    assert torch.equal(explorer.drawn["spans"], li.window_spans(len(explorer.drawn["tokens"]), 6, 2))


def test_a_text_shorter_than_the_window_is_one_window(tok):
    explorer = WindowExplorer(tok, text="Hamlet.", window=12, stride=8)
    assert explorer.drawn["tokens"] == ["hamlet", "."]
    assert explorer.drawn["title"] == "window 12, stride 8: 1 window over 2 tokens, overlap 4"
    explorer.text.value = "Hamlet"
    assert explorer.drawn["title"] == "window 12, stride 8: 1 window over 1 token, overlap 4"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"stride": 12}, "`window`=12 must be larger than `stride`=12"),
        (
            {"stride": 20},
            "`window`=12 must be larger than `stride`=20: neighbouring windows then leave stride - window = 8",
        ),
        ({"text": "   "}, "Type a text first: the box is empty."),
        ({"text": "word " * 200}, "The text has 200 tokens; this explorer draws at most 120: shorten it."),
    ],
)
def test_bad_settings_show_a_message_in_the_figure(tok, settings, message):
    explorer = WindowExplorer(tok, window=12, stride=8)
    for name, value in settings.items():
        getattr(explorer, name).value = value
    drawn = explorer.drawn
    assert drawn["message"].startswith(message)
    assert drawn["matrix"] is None and drawn["spans"] is None and drawn["title"] == "nothing to draw"
    assert drawn["figure"].axes[0].texts[0].get_text().replace("\n", " ") == drawn["message"]  # wrapped at 90
    explorer.stride.value, explorer.text.value = 4, "A short text again."
    assert explorer.drawn["message"] is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window": 8, "stride": 8}, "`window`=8 must be larger than `stride`=8"),
        ({"window": 8, "stride": 0}, "`stride` must be at least 1"),
        ({"window": 60, "stride": 30}, "`window` must be at most 48 tokens in this explorer, got 60"),
    ],
)
def test_bad_initial_settings_are_errors(tok, kwargs, match):
    with pytest.raises(ValueError, match=match):
        WindowExplorer(tok, **kwargs)


def test_the_window_map_labels_are_readable_where_it_is_shown(tok, model):
    """Labels of at least 9 pt (12.5 px at matplotlib's 100 dpi), on a figure narrow enough (the tokens in panels of
    at most 30) that JupyterLab shows it at its own size; ``tests/test_browser_explorers.py`` measures it shown."""
    figure = WindowExplorer(tok, model).drawn["figure"]
    texts = [t for t in figure.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
    assert min(t.get_fontsize() for t in texts) >= 9
    assert figure.get_size_inches()[0] * figure.dpi <= 960
