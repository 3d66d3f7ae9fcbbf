"""The exercises of notebook 08: learner code written differently from the package is judged as the package's
(the generic checks of every exercise, the registry, verdicts, hints and solutions, are in test_exercises.py)."""

import pytest
import torch
import torch.nn.functional as F

from bertcourse.exercises import check


def test_the_notebooks_solutions_are_correct():
    def role_score(attention, targets):
        on_targets = (attention * targets).sum(dim=-1)
        return on_targets.sum(dim=-1) / targets.any(dim=-1).sum()

    def attention_rollout(attentions, residual=True):
        rollout = None
        for layer_maps in attentions:
            mixing = layer_maps.mean(dim=-3)
            if residual:
                mixing = 0.5 * mixing + 0.5 * torch.eye(mixing.shape[-1])
                mixing = mixing / mixing.sum(dim=-1, keepdim=True)
            rollout = mixing if rollout is None else mixing @ rollout
        return rollout

    def mean_pooling(last_hidden_state, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones(last_hidden_state.shape[:2])
        mask = attention_mask[:, :, None].to(last_hidden_state.dtype)
        return (last_hidden_state * mask).sum(dim=1) / mask.sum(dim=1)

    for fn in (role_score, attention_rollout, mean_pooling):
        assert check(fn.__name__, fn).status == "correct", fn.__name__


def role_score_with_einsum(attention, targets):
    mass = torch.einsum("...qk,qk->...", attention, targets.float())
    return mass / targets.sum(dim=-1).clamp(max=1).sum()


def rollout_with_an_identity_start(attentions, residual=True):
    seq = attentions.shape[-1]
    rollout = torch.eye(seq)
    for layer_maps in attentions:
        mixing = layer_maps.mean(dim=-3)
        if residual:
            mixing = (mixing + torch.eye(seq)) / 2
        rollout = mixing @ rollout
    return rollout


def pooling_with_where(last_hidden_state, attention_mask=None):
    if attention_mask is None:
        return last_hidden_state.mean(dim=1)
    mask = attention_mask.bool()[:, :, None]
    kept = torch.where(mask, last_hidden_state, torch.zeros(()))
    return kept.sum(dim=1) / mask.sum(dim=1)


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("role_score", role_score_with_einsum),
        ("attention_rollout", rollout_with_an_identity_start),
        ("mean_pooling", pooling_with_where),
    ],
)
def test_correct_solutions_written_differently_pass(name, fn):
    assert check(name, fn).status == "correct"


def rollout_of_the_sum_of_heads_with_a_loop(attentions, residual=True):
    rollout = None
    for layer_maps in attentions:
        mixing = sum(layer_maps.unbind(dim=-3))
        if residual:
            mixing = 0.5 * mixing + 0.5 * torch.eye(mixing.shape[-1])
            mixing = mixing / mixing.sum(dim=-1, keepdim=True)
        rollout = mixing if rollout is None else mixing @ rollout
    return rollout


@pytest.mark.parametrize(
    ("name", "fn", "mistake"),
    [
        ("role_score", lambda attention, targets: (attention * targets).sum(-1).mean(-1), "a mean over every query"),
        ("attention_rollout", rollout_of_the_sum_of_heads_with_a_loop, "the heads summed instead of averaged"),
        ("mean_pooling", lambda h, mask=None: F.normalize(pooling_with_where(h, mask), dim=1), "the mean normalised"),
        ("mean_pooling", lambda h, mask=None: h.sum(dim=1) / h.shape[1], "the padding averaged in"),
    ],
)
def test_mistakes_written_differently_are_recognised(name, fn, mistake):
    assert check(name, fn).mistake.startswith(mistake)
