"""What pushes a prediction: two saliency scores per token of a sequence classifier's input.

``gradient_x_input`` is the gradient of the target class's log-probability with respect to each
token's word embedding, times that embedding, summed over its features (one forward and one backward
pass). ``occlusion`` is p(target) minus p(target) with the token left out (one batched forward pass of
every input with one token removed). The two can disagree; notebook 10's saliency explorer draws them.
"""

from __future__ import annotations

import torch

from .._validation import (
    describe,
    is_int,
)
from .heads import BertForSequenceClassification


def gradient_x_input(model: BertForSequenceClassification, batch: dict, target: int) -> torch.Tensor:
    """(batch, seq) saliency of each token for class ``target``: d log p(target) / d e_i . e_i, summed over the
    features of the token's word embedding e_i (positive: the token pushes towards ``target``).

    Computed in eval mode (dropout off); the model's mode and its gradients are left as they were.
    """
    _require_classifier(model, target)
    captured = {}

    def keep(module, inputs, output):
        output.retain_grad()
        captured["embeddings"] = output  # (batch, seq, hidden)

    device = model.classifier.weight.device
    batch = {name: value.to(device) for name, value in batch.items()}
    was_training = model.training
    model.eval()
    handle = model.bert.embeddings.word_embeddings.register_forward_hook(keep)
    try:
        with torch.enable_grad():
            logits = model(**batch).logits  # (batch, num_labels)
            log_p = logits.log_softmax(dim=-1)[:, target]  # (batch,)
            (grad,) = torch.autograd.grad(log_p.sum(), captured["embeddings"])  # (batch, seq, hidden)
    finally:
        handle.remove()
        model.train(was_training)
    return (grad * captured["embeddings"]).sum(dim=-1).detach()  # (batch, seq)


def occlusion(model: BertForSequenceClassification, batch: dict, target: int) -> torch.Tensor:
    """(seq,) saliency of each token of one input for class ``target``: p(target) minus p(target) with the token
    left out (positive: without it the model believes ``target`` less). [CLS], [SEP] and padding get 0.

    ``batch`` holds one input (batch size 1); one forward pass runs every input with one token removed.
    """
    _require_classifier(model, target)
    input_ids = batch["input_ids"]
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"`batch['input_ids']` must hold one input, shape (1, seq), got {describe(input_ids)}.")
    mask = batch.get("attention_mask", torch.ones_like(input_ids))[0].bool().cpu()  # (seq,)
    ids = input_ids[0].cpu()[mask].to(model.classifier.weight.device)  # (n,): the real tokens, [CLS] first, [SEP] last
    n = len(ids)
    keep = ~torch.eye(n, dtype=torch.bool, device=ids.device)[1:-1]  # (n - 2, n): row k leaves out token k + 1
    variants = ids.expand(n - 2, n)[keep].view(n - 2, n - 1)  # (n - 2, n - 1)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            p_full = model(ids[None]).logits.softmax(dim=-1)[0, target]  # ()
            p_without = model(variants).logits.softmax(dim=-1)[:, target] if n > 2 else ids.new_zeros(0).float()
    finally:
        model.train(was_training)
    scores = torch.zeros(input_ids.shape[1])  # (seq,)
    positions = mask.nonzero().flatten()[1:-1]  # (n - 2,): where the words sit in the input
    scores[positions] = (p_full - p_without).cpu()  # (n - 2,)
    return scores


def _require_classifier(model, target) -> None:
    if not isinstance(model, BertForSequenceClassification):
        raise TypeError(f"`model` must be a BertForSequenceClassification, got {describe(model)}.")
    if not is_int(target) or not 0 <= target < model.num_labels:
        raise ValueError(
            f"`target` must be a class index 0..{model.num_labels - 1} ({', '.join(model.label_names)}), "
            f"got {target!r}."
        )
