"""The build thread's machinery: ``use`` returns the learner's piece or the reference and says which, a piece that
raises later hands over to the reference, and a build piece's check sees gradients that its values hide."""

import math

import pytest
import torch
import torch.nn.functional as F

import bertcourse as bc
from bertcourse.exercises import EXERCISES, check, use


def layer_norm_right(x, weight, bias, eps=1e-12):
    variance, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return (x - mean) * torch.rsqrt(variance + eps) * weight + bias


def layer_norm_detached(x, weight, bias, eps=1e-12):
    mean = x.mean(-1, keepdim=True).detach()  # the mistake: the statistics are constants for autograd
    variance = ((x - mean) ** 2).mean(-1, keepdim=True).detach()
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def layer_norm_no_grad(x, weight, bias, eps=1e-12):
    with torch.no_grad():
        return layer_norm_right(x, weight, bias, eps)


def layer_norm_skeleton(x, weight, bias, eps=1e-12):
    raise NotImplementedError


def feed_forward_no_grad(x, w1, b1, w2, b2):
    with torch.no_grad():
        return F.gelu(x @ w1 + b1) @ w2 + b2


def feed_forward_right(x, w1, b1, w2, b2):
    h = torch.einsum("...i,ij->...j", x, w1) + b1
    return torch.einsum("...j,jk->...k", 0.5 * h * (1 + torch.erf(h / math.sqrt(2))), w2) + b2


def post_ln_weights_detached(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = bc.layer_norm(x + attention(x), ln1_weight.detach(), ln1_bias.detach(), eps)  # gamma, beta never learn
    return bc.layer_norm(h + feed_forward(h), ln2_weight, ln2_bias, eps)


def test_use_returns_a_right_piece_and_says_the_cells_below_run_it(capsys):
    piece = use("layer_norm", layer_norm_right)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("✅ Correct") and "gradients included" in lines[0]
    assert lines[1] == "→ The cells below run your `layer_norm`."
    assert piece.__wrapped__ is layer_norm_right
    x, w, b = torch.randn(2, 3, 8), torch.randn(8), torch.randn(8)
    torch.testing.assert_close(piece(x, w, b), bc.layer_norm(x, w, b))


@pytest.mark.parametrize(
    ("fn", "verdict", "last"),
    [
        (
            layer_norm_skeleton,
            "⏳ Not attempted yet",
            "→ The cells below run the package's `layer_norm` until you write yours.",
        ),
        (layer_norm_detached, "❌ Wrong", "→ The cells below run the package's `layer_norm` until yours passes."),
        (42, "❌ Wrong", "→ The cells below run the package's `layer_norm` until yours passes."),
    ],
)
def test_use_returns_the_reference_otherwise_and_says_so(capsys, fn, verdict, last):
    assert use("layer_norm", fn) is EXERCISES["layer_norm"].reference
    out = capsys.readouterr().out
    assert out.startswith(verdict)
    assert out.splitlines()[-1] == last


def test_a_piece_that_raises_later_is_reported_once_and_the_reference_takes_over(capsys):
    def layer_norm_not_for_width_11(x, weight, bias, eps=1e-12):
        if x.shape[-1] == 11:  # no test case has width 11
            raise ValueError("width 11 is not handled")
        return layer_norm_right(x, weight, bias, eps)

    piece = use("layer_norm", layer_norm_not_for_width_11)
    capsys.readouterr()
    x, w, b = torch.randn(3, 11), torch.randn(11), torch.randn(11)
    torch.testing.assert_close(piece(x, w, b), bc.layer_norm(x, w, b))
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("⚠️ Your `layer_norm` raised ValueError (width 11 is not handled) here;")
    x8 = torch.randn(3, 8)
    torch.testing.assert_close(
        piece(x8, torch.ones(8), torch.zeros(8)), bc.layer_norm(x8, torch.ones(8), torch.zeros(8))
    )
    assert capsys.readouterr().out == ""  # said once; the reference answers every later call


def test_use_of_an_unknown_name_is_the_notebook_authors_error():
    with pytest.raises(ValueError, match="unknown exercise 'layer_nrom'"):
        use("layer_nrom", layer_norm_right)


@pytest.mark.parametrize(
    ("name", "fn", "said"),
    [
        ("layer_norm", layer_norm_detached, "the gradient with respect to `x` is not the reference's"),
        ("layer_norm", layer_norm_no_grad, "no gradient flows back through your function"),
        ("feed_forward", feed_forward_no_grad, "no gradient flows back through your function"),
        ("post_ln_layer", post_ln_weights_detached, "no gradient reaches `ln1_weight`"),
    ],
)
def test_values_right_but_gradients_cut_are_wrong_and_named(name, fn, said):
    result = check(name, fn)
    assert result.status == "wrong" and result.mistake == "the gradient cut", result.message
    assert result.message.startswith("❌ Wrong: your values are right, but ")
    assert said in result.message


def test_right_pieces_written_differently_pass_with_their_gradients():
    assert check("layer_norm", layer_norm_right).passed
    assert check("feed_forward", feed_forward_right).passed


def test_every_gradient_argument_names_a_parameter_of_its_reference():
    import inspect

    for exercise in EXERCISES.values():
        parameters = inspect.signature(exercise.reference).parameters
        assert set(exercise.gradients) <= set(parameters), exercise.name


def test_pytorchs_own_layer_norm_is_not_the_learners():
    result = check("layer_norm", lambda x, w, b, eps=1e-12: F.layer_norm(x, x.shape[-1:], w, b, eps))
    assert result.mistake == "calls torch.nn.functional.layer_norm", result.message
    assert result.message.startswith("❌ Wrong: this calls PyTorch's `torch.nn.functional.layer_norm`")
