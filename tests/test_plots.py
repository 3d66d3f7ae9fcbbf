"""The plotting functions draw what they are given, label it with the tokens, and refuse bad shapes."""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

import bertcourse as bc
from bertcourse.plots import heads_grid_shape, plot_attention, plot_head_view, plot_heads_grid, plot_position_encoding

matplotlib.use("Agg")

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def random_attention(*shape, seed=0):
    """Rows that sum to 1, like softmax outputs."""
    return torch.softmax(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), dim=-1)


def tick_labels(ticks):
    return [tick.get_text() for tick in ticks]


# --- plot_attention ---------------------------------------------------------------------------------------


def test_plot_attention_labels_both_axes_with_tokens_and_shows_the_matrix():
    weights = random_attention(5, 5)
    ax = plot_attention(weights, TOKENS, title="head 0")
    assert tick_labels(ax.get_yticklabels()) == TOKENS
    assert tick_labels(ax.get_xticklabels()) == TOKENS
    np.testing.assert_allclose(ax.images[0].get_array(), weights.numpy())
    assert ax.get_title() == "head 0"
    assert ax.get_xlabel() == "key (attended to)"
    assert ax.get_ylabel() == "query (attending)"
    colorbars = [other for other in ax.figure.axes if other is not ax]
    assert len(colorbars) == 1
    assert colorbars[0].get_ylabel() == "attention weight"


def test_plot_attention_key_tokens_label_the_columns_of_a_rectangular_map():
    weights = random_attention(2, 5)
    ax = plot_attention(weights, ["it", "was"], key_tokens=TOKENS)
    assert tick_labels(ax.get_yticklabels()) == ["it", "was"]
    assert tick_labels(ax.get_xticklabels()) == TOKENS
    assert ax.images[0].get_array().shape == (2, 5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_plot_attention_accepts_any_float_dtype_and_tensors_with_gradients(dtype):
    weights = random_attention(5, 5).to(dtype).requires_grad_()
    ax = plot_attention(weights, TOKENS)
    np.testing.assert_allclose(ax.images[0].get_array(), weights.detach().float().numpy())


def test_plot_attention_accepts_numpy_and_draws_on_a_given_axes():
    figure, ax = plt.subplots()
    weights = np.eye(5)
    returned = plot_attention(weights, TOKENS, ax=ax, colorbar_label=None)
    assert returned is ax
    assert len(figure.axes) == 1  # no colorbar asked for
    np.testing.assert_array_equal(ax.images[0].get_array(), weights)


def test_plot_attention_colour_scale_runs_over_the_data_unless_vmin_and_vmax_fix_it():
    weights = torch.tensor([[0.2, 0.8], [0.4, 0.6]])
    assert plot_attention(weights, ["a", "b"]).images[0].get_clim() == pytest.approx((0.2, 0.8))
    ax = plot_attention(weights, ["a", "b"], vmin=0, vmax=1)
    assert ax.images[0].get_clim() == (0, 1)
    (colorbar,) = [other for other in ax.figure.axes if other is not ax]
    assert colorbar.get_ylim() == (0, 1)  # the colorbar shows the whole fixed scale
    assert plot_attention(weights, ["a", "b"], vmax=2).images[0].get_clim() == pytest.approx((0.2, 2.0))


def test_plot_attention_rejects_a_batch_of_maps_naming_weights():
    with pytest.raises(ValueError, match=r"`weights` must be 2-D \(q_len, k_len\), got shape \(1, 12, 5, 5\)"):
        plot_attention(random_attention(1, 12, 5, 5), TOKENS)


def test_plot_attention_rejects_tokens_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"`tokens` has 4 labels but the number of rows \(queries\).* is 5"):
        plot_attention(random_attention(5, 5), TOKENS[:4])


def test_plot_attention_rejects_key_tokens_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"`key_tokens` has 3 labels but the number of columns \(keys\).* is 5"):
        plot_attention(random_attention(2, 5), ["it", "was"], key_tokens=TOKENS[:3])


def test_plot_attention_asks_for_key_tokens_when_the_map_is_not_square():
    with pytest.raises(ValueError, match=r"2 rows \(queries\) but 5 columns.*pass `key_tokens`"):
        plot_attention(random_attention(2, 5), ["it", "was"])


def test_plot_attention_refuses_a_sentence_string_as_tokens():
    with pytest.raises(TypeError, match=r"`tokens` must be a list of token strings, got the string 'the cat'"):
        plot_attention(random_attention(2, 2), "the cat")


def test_plot_attention_refuses_something_that_is_not_an_array():
    with pytest.raises(TypeError, match=r"`weights` must be a torch tensor or a numpy array, got dict"):
        plot_attention({"a": 1}, TOKENS)


# --- plot_head_view ---------------------------------------------------------------------------------------


def head_view_lines(ax):
    (lines,) = [artist for artist in ax.collections if isinstance(artist, LineCollection)]
    return lines


def test_head_view_draws_one_line_per_nonzero_weight_with_the_weight_as_opacity():
    weights = random_attention(5, 5).masked_fill(~bc.causal_mask(5), 0.0)
    weights = weights / weights.sum(dim=-1, keepdim=True)  # a causal head: 15 nonzero weights
    lines = head_view_lines(plot_head_view(weights, TOKENS))
    segments = lines.get_segments()
    assert len(segments) == 15
    for segment, rgba, width in zip(segments, lines.get_colors(), lines.get_linewidths(), strict=True):
        (x_query, y_query), (x_key, y_key) = segment
        assert (x_query, x_key) == (0.0, 1.0)  # queries on the left, keys on the right
        query, key = int(-y_query), int(-y_key)
        assert key <= query  # no line into the future
        assert rgba[3] == pytest.approx(float(weights[query, key]), abs=1e-6)
        assert width == pytest.approx(0.5 + 3.5 * float(weights[query, key]), abs=1e-5)


def test_head_view_stronger_weights_draw_thicker_lines():
    weights = torch.tensor([[0.9, 0.1], [0.3, 0.7]])
    lines = head_view_lines(plot_head_view(weights, ["a", "b"]))
    endpoints = [tuple(np.round(segment.ravel(), 6)) for segment in lines.get_segments()]  # (x_q, y_q, x_k, y_k)
    widths = dict(zip(endpoints, lines.get_linewidths(), strict=True))
    assert widths[(0.0, 0.0, 1.0, 0.0)] > widths[(0.0, 0.0, 1.0, -1.0)]  # a -> a (0.9) beats a -> b (0.1)
    assert widths[(0.0, -1.0, 1.0, -1.0)] > widths[(0.0, -1.0, 1.0, 0.0)]  # b -> b (0.7) beats b -> a (0.3)


def test_head_view_writes_every_token_in_both_columns_and_the_title():
    ax = plot_head_view(random_attention(5, 5), TOKENS, title="layer 2, head 3")
    left = [text.get_text() for text in ax.texts if text.get_position()[0] < 0]
    right = [text.get_text() for text in ax.texts if text.get_position()[0] > 1]
    assert left == [*TOKENS, "query"]
    assert right == [*TOKENS, "key"]
    assert ax.get_title() == "layer 2, head 3"


def test_head_view_rejects_scores_outside_zero_one():
    with pytest.raises(ValueError, match=r"`weights` must hold attention weights in \[0, 1\].*softmax first"):
        plot_head_view(torch.randn(5, 5) * 3, TOKENS)


def test_head_view_rejects_a_rectangular_map():
    with pytest.raises(ValueError, match=r"`weights` must be a square \(seq, seq\).*got shape \(2, 5\)"):
        plot_head_view(random_attention(2, 5), TOKENS)


def test_head_view_rejects_tokens_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"`tokens` has 6 labels but the size of `weights` is 5"):
        plot_head_view(random_attention(5, 5), [*TOKENS, "extra"])


# --- plot_position_encoding -------------------------------------------------------------------------------


def test_position_encoding_heatmap_shows_the_table_on_a_symmetric_scale():
    table = bc.sinusoidal_position_encoding(20, 16)
    ax = plot_position_encoding(table, title="sinusoids")
    np.testing.assert_allclose(ax.images[0].get_array(), table.numpy())
    assert ax.images[0].get_clim() == pytest.approx((-1.0, 1.0), abs=1e-6)
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("dimension", "position", "sinusoids")
    assert len(ax.figure.axes) == 2  # the map and its colorbar


def test_position_encoding_of_learned_embeddings_scales_to_their_largest_value():
    table = torch.tensor([[0.5, -2.0], [1.0, 0.0]])
    ax = plot_position_encoding(table)
    assert ax.images[0].get_clim() == pytest.approx((-2.0, 2.0))
    assert ax.get_title() == "position encoding"


def test_position_encoding_rejects_a_vector_naming_table():
    with pytest.raises(ValueError, match=r"`table` must be 2-D \(max_len, d_model\), got shape \(16,\)"):
        plot_position_encoding(torch.zeros(16))


# --- plot_heads_grid --------------------------------------------------------------------------------------


def test_heads_grid_draws_every_head_with_its_own_map():
    layer_weights = random_attention(6, 5, 5)
    figure = plot_heads_grid(layer_weights, TOKENS, title="layer 1")
    assert isinstance(figure, Figure)
    heads = [ax for ax in figure.axes if ax.get_title().startswith("head")]
    assert [ax.get_title() for ax in heads] == [f"head {h}" for h in range(6)]
    for head, ax in enumerate(heads):
        np.testing.assert_allclose(ax.images[0].get_array(), layer_weights[head].numpy())
        assert ax.images[0].get_clim() == pytest.approx((0.0, float(layer_weights.max())))
    assert tick_labels(heads[0].get_yticklabels()) == TOKENS  # first column carries the query labels
    assert tick_labels(heads[3].get_xticklabels()) == TOKENS  # one row of six: every panel labels the keys
    assert list(heads[1].get_yticks()) == []  # no empty labels either: fewer artists to draw
    assert figure._suptitle.get_text() == "layer 1"  # get_suptitle() is matplotlib 3.8 on


def test_heads_grid_labels_keys_only_below_the_last_row_and_queries_only_left_of_the_first_column():
    figure = plot_heads_grid(random_attention(12, 5, 5), TOKENS)
    heads = head_panels(figure)
    for head, ax in enumerate(heads):
        assert tick_labels(ax.get_yticklabels()) == (TOKENS if head % 6 == 0 else [])
        assert tick_labels(ax.get_xticklabels()) == (TOKENS if head >= 6 else [])


def head_panels(figure):
    return [ax for ax in figure.axes if ax.get_title().startswith("head")]


@pytest.mark.parametrize(
    ("num_heads", "seq_len", "rows", "columns"), [(12, 13, 2, 6), (12, 5, 2, 6), (4, 13, 1, 4), (2, 5, 1, 2)]
)
def test_heads_grid_fits_a_laptop_window_with_token_labels_of_8_points(num_heads, seq_len, rows, columns):
    tokens = [f"token{i}" for i in range(seq_len)]
    figure = plot_heads_grid(random_attention(num_heads, seq_len, seq_len), tokens, title="layer 0")
    width, height = figure.get_size_inches()
    assert width <= 12.0 and height <= 6.0  # shown whole: no scrolling, not shrunk
    heads = head_panels(figure)
    assert len({round(ax.get_position().y0, 6) for ax in heads}) == rows
    assert len({round(ax.get_position().x0, 6) for ax in heads}) == columns
    assert {label.get_fontsize() for label in heads[0].get_yticklabels()} == {8.0}
    assert {label.get_fontsize() for label in heads[-1].get_xticklabels()} == {8.0}


@pytest.mark.parametrize(
    ("num_heads", "room", "shape"),
    [(12, (10.0, 4.6), (2, 6)), (12, (4.0, 9.0), (4, 3)), (1, (5.0, 5.0), (1, 1)), (16, (10.0, 4.6), (3, 6))],
)
def test_heads_grid_shape_picks_the_largest_panels_that_fit(num_heads, room, shape):
    rows, columns, panel = heads_grid_shape(num_heads, 13, *room)
    assert (rows, columns) == shape
    assert columns * panel <= room[0] and rows * panel <= room[1]


@pytest.mark.parametrize(("seq_len", "step"), [(20, 1), (40, 2), (80, 4)])
def test_heads_grid_labels_of_a_long_sentence_shrink_then_thin_out_but_never_overlap(seq_len, step):
    tokens = [f"t{i}" for i in range(seq_len)]
    figure = plot_heads_grid(random_attention(12, seq_len, seq_len), tokens)
    figure.canvas.draw()
    first = head_panels(figure)[0]
    labels = first.get_yticklabels()
    assert [label.get_text() for label in labels] == tokens[::step]
    (size,) = {label.get_fontsize() for label in labels}
    assert 5.0 <= size <= 8.0
    label_spacing_points = first.get_window_extent().height / seq_len * step * 72 / figure.dpi
    assert size < label_spacing_points


@pytest.mark.parametrize("tokens", [TOKENS, ["[CLS]", "internationalisation", "##s", "[SEP]"]])
def test_heads_grid_keeps_every_label_inside_the_figure_and_off_the_others(tokens):
    n = len(tokens)
    figure = plot_heads_grid(random_attention(12, n, n), tokens, title="layer 3: all 12 heads")
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    canvas = figure.bbox
    heads = head_panels(figure)
    y_labels = [label.get_window_extent(renderer) for label in heads[0].get_yticklabels()]
    x_labels = [label.get_window_extent(renderer) for ax in heads[6:] for label in ax.get_xticklabels()]
    axis_labels = [text.get_window_extent(renderer) for text in (figure._supylabel, figure._supxlabel)]
    for box in [*y_labels, *x_labels, *axis_labels, figure._suptitle.get_window_extent(renderer)]:
        assert canvas.x0 <= box.x0 and box.x1 <= canvas.x1 and canvas.y0 <= box.y0 and box.y1 <= canvas.y1
    assert not any(axis_labels[0].overlaps(box) for box in y_labels)  # "query (attending)" beside the tokens
    assert not any(axis_labels[1].overlaps(box) for box in x_labels)  # "key (attended to)" below them
    panels = [ax.get_window_extent(renderer) for ax in heads]
    assert not any(panel.overlaps(box) for panel in panels for box in y_labels + x_labels)


def test_heads_grid_size_depends_on_the_token_lengths_only_not_on_a_font_renderer():
    weights = random_attention(12, 4, 4)
    narrow = plot_heads_grid(weights, ["ill", "iii", "l", "."]).get_size_inches()
    wide = plot_heads_grid(weights, ["MWM", "WWW", "M", "W"]).get_size_inches()
    np.testing.assert_array_equal(narrow, wide)  # a notebook's "<Figure size ...>" is the same on every machine


def test_heads_grid_colorbar_stands_next_to_the_last_column():
    figure = plot_heads_grid(random_attention(12, 13, 13), [f"token{i}" for i in range(13)])
    figure.canvas.draw()
    (colorbar,) = [ax for ax in figure.axes if ax.get_ylabel() == "attention weight"]
    last_column_right = max(ax.get_position().x1 for ax in head_panels(figure))
    gap_inches = (colorbar.get_position().x0 - last_column_right) * figure.get_size_inches()[0]
    assert 0 < gap_inches < 0.3
    top = max(ax.get_position().y1 for ax in head_panels(figure))
    bottom = min(ax.get_position().y0 for ax in head_panels(figure))
    assert colorbar.get_position().y0 == pytest.approx(bottom) and colorbar.get_position().y1 == pytest.approx(top)


def test_heads_grid_rejects_a_single_map_naming_layer_weights():
    with pytest.raises(ValueError, match=r"`layer_weights` must be 3-D \(heads, seq, seq\), got shape \(5, 5\)"):
        plot_heads_grid(random_attention(5, 5), TOKENS)


def test_heads_grid_rejects_tokens_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"`tokens` has 4 labels but the sequence length of `layer_weights` is 5"):
        plot_heads_grid(random_attention(2, 5, 5), TOKENS[:4])


def test_heads_grid_rejects_rectangular_maps():
    with pytest.raises(ValueError, match=r"`layer_weights` must be self-attention maps"):
        plot_heads_grid(random_attention(2, 3, 5), TOKENS)


def test_heads_grid_rejects_maps_of_no_tokens():
    with pytest.raises(ValueError, match=r"`layer_weights` must hold at least one token, got shape \(2, 0, 0\)"):
        plot_heads_grid(torch.zeros(2, 0, 0), [])
