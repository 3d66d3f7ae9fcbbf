"""The exercises of notebook 10: learner code written differently from the package is judged as the package's
(the generic checks of every exercise, the registry, verdicts, hints and solutions, are in test_exercises.py)."""

import pytest
import torch
import torch.nn.functional as F

from bertcourse import finetuning
from bertcourse.exercises import check


def align_with_a_set(word_ids, word_labels):
    seen, labels = set(), []
    for word in word_ids:
        labels.append(-100 if word is None or word in seen else word_labels[word])
        if word is not None:
            seen.add(word)
    return torch.tensor(labels)


def span_with_loops(start_logits, end_logits, context_mask, max_answer_length):
    flat_start, flat_end = (
        start_logits.reshape(-1, start_logits.shape[-1]),
        end_logits.reshape(-1, end_logits.shape[-1]),
    )
    flat_mask = context_mask.reshape(-1, context_mask.shape[-1])
    spans = []
    for s, e, m in zip(flat_start.tolist(), flat_end.tolist(), flat_mask.tolist(), strict=True):
        best, where = float("-inf"), [0, 0]
        for i in range(len(s)):
            for j in range(i, min(len(s), i + max_answer_length)):
                if m[i] and m[j] and s[i] + e[j] > best:
                    best, where = s[i] + e[j], [i, j]
        spans.append(where)
    return torch.tensor(spans).reshape(*start_logits.shape[:-1], 2)


def head_with_functional(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    pooled = torch.tanh(F.linear(hidden_states.select(-2, 0), pooler_weight, pooler_bias))
    return F.linear(pooled, classifier_weight, classifier_bias)


def choose_with_sums(runs):
    totals = {}
    for run in runs:
        dev, test, n = totals.get(run["lr"], (0.0, 0.0, 0))
        totals[run["lr"]] = (dev + run["dev"], test + run["test"], n + 1)
    best = None
    for lr, (dev, test, n) in totals.items():
        if best is None or dev / n > best[1]:
            best = (lr, dev / n, test / n)
    return best[0], best[2]


def predict_with_a_loop(model, batches):
    mode = model.training
    model.eval()
    labels = []
    for batch in batches:
        with torch.inference_mode():
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        labels.extend(int(i) for i in logits.argmax(-1))
    model.train(mode)
    return torch.tensor(labels)


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("align_word_labels", align_with_a_set),
        ("best_span", span_with_loops),
        ("classification_logits", head_with_functional),
        ("choose_on_dev", choose_with_sums),
        ("predict_labels", predict_with_a_loop),
    ],
)
def test_other_correct_solutions_are_accepted(name, fn):
    assert check(name, fn).status == "correct"


def test_a_list_instead_of_a_tensor_is_explained():
    def as_list(word_ids, word_labels):
        return finetuning.align_word_labels(word_ids, word_labels).tolist()

    result = check("align_word_labels", as_list)
    assert result.status == "wrong" and "torch.Tensor" in result.message


def test_the_references_of_the_head_and_the_predictions_are_the_models_own():
    """classification_logits is the classifier's head in eval mode; predict_labels its argmax, mode given back."""
    from bertcourse.exercises.fine_tuning import _predict_batches, _predict_model

    model = _predict_model(True)
    batches = _predict_batches(torch.Generator().manual_seed(0), (3, 2))
    predicted = finetuning.predict_labels(model, batches)
    assert model.training  # given back in training mode
    model.eval()
    with torch.no_grad():
        outputs = [model(**batch) for batch in batches]
        hidden = [model.bert(batch["input_ids"], attention_mask=batch["attention_mask"]) for batch in batches]
    assert torch.equal(predicted, torch.cat([o.logits.argmax(-1) for o in outputs]))
    pooler, classifier = model.bert.pooler.dense, model.classifier
    for out, h in zip(outputs, hidden, strict=True):
        logits = finetuning.classification_logits(
            h.last_hidden_state, pooler.weight, pooler.bias, classifier.weight, classifier.bias
        )
        torch.testing.assert_close(logits, out.logits)


def test_choose_on_dev_never_looks_at_test_to_choose():
    runs = [
        {"lr": 1e-3, "seed": 0, "dev": 0.8, "test": 0.1},
        {"lr": 3e-4, "seed": 0, "dev": 0.7, "test": 0.9},
    ]
    assert finetuning_table_choose(runs) == (1e-3, 0.1)
    with pytest.raises(ValueError, match="'lr', 'dev' and 'test'"):
        finetuning_table_choose([{"lr": 1e-3, "dev": 0.5}])


def finetuning_table_choose(runs):
    from bertcourse.finetuning_table import choose_on_dev

    return choose_on_dev(runs)
