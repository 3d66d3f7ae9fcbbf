"""The exercises of notebook 10: learner code written differently from the package is judged as the package's
(the generic checks of every exercise, the registry, verdicts, hints and solutions, are in test_exercises.py)."""

import pytest
import torch
import torch.nn.functional as F

from bertcourse import finetuning
from bertcourse.exercises import EXERCISES, check


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
    from bertcourse.exercises.finetuning import _predict_batches, _predict_model

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
    from bertcourse.finetuning.table import choose_on_dev

    return choose_on_dev(runs)


# --- realistic wrong answers the catalogue does not list, and more right ones -----------------------


def relu_pooler(h, pw, pb, cw, cb):
    return F.linear(torch.relu(F.linear(h[..., 0, :], pw, pb)), cw, cb)


def sigmoid_pooler(h, pw, pb, cw, cb):
    return F.linear(torch.sigmoid(F.linear(h[..., 0, :], pw, pb)), cw, cb)


def no_pooler_bias(h, pw, pb, cw, cb):
    return F.linear(torch.tanh(h[..., 0, :] @ pw.T), cw, cb)


def no_classifier_bias(h, pw, pb, cw, cb):
    return torch.tanh(F.linear(h[..., 0, :], pw, pb)) @ cw.T


def batched_only(h, pw, pb, cw, cb):
    return F.linear(torch.tanh(F.linear(h[:, 0], pw, pb)), cw, cb)


def log_softmax_out(h, pw, pb, cw, cb):
    return F.linear(torch.tanh(F.linear(h[..., 0, :], pw, pb)), cw, cb).log_softmax(-1)


def pooler_twice(h, pw, pb, cw, cb):
    p = torch.tanh(F.linear(h[..., 0, :], pw, pb))
    return F.linear(torch.tanh(F.linear(p, pw, pb)), cw, cb)


def classifier_untransposed(h, pw, pb, cw, cb):
    return torch.tanh(F.linear(h[..., 0, :], pw, pb)) @ cw + cb


def by_sum(runs):
    tot = {}
    for r in runs:
        tot.setdefault(r["lr"], []).append(r)
    lr = max(tot, key=lambda k: sum(r["dev"] for r in tot[k]))
    return lr, sum(r["test"] for r in tot[lr]) / len(tot[lr])


def best_dev_run_test(runs):
    tot = {}
    for r in runs:
        tot.setdefault(r["lr"], []).append(r)
    lr = max(tot, key=lambda k: sum(r["dev"] for r in tot[k]) / len(tot[k]))
    return lr, max(tot[lr], key=lambda r: r["dev"])["test"]


def reversed_tuple(runs):
    tot = {}
    for r in runs:
        tot.setdefault(r["lr"], []).append(r)
    lr = max(tot, key=lambda k: sum(r["dev"] for r in tot[k]) / len(tot[k]))
    return sum(r["test"] for r in tot[lr]) / len(tot[lr]), lr


def dev_plus_test(runs):
    tot = {}
    for r in runs:
        tot.setdefault(r["lr"], []).append(r)
    lr = max(tot, key=lambda k: sum(r["dev"] + r["test"] for r in tot[k]) / len(tot[k]))
    return lr, sum(r["test"] for r in tot[lr]) / len(tot[lr])


def percent(runs):
    tot = {}
    for r in runs:
        tot.setdefault(r["lr"], []).append(r)
    lr = max(tot, key=lambda k: sum(r["dev"] for r in tot[k]) / len(tot[k]))
    return lr, 100 * sum(r["test"] for r in tot[lr]) / len(tot[lr])


def first_seed_only(runs):
    first = {}
    for r in runs:
        first.setdefault(r["lr"], r)
    lr = max(first, key=lambda k: first[k]["dev"])
    return lr, first[lr]["test"]


def median_dev(runs):
    import statistics

    tot = {}
    for r in runs:
        tot.setdefault(r["lr"], []).append(r)
    lr = max(tot, key=lambda k: statistics.median(r["dev"] for r in tot[k]))
    return lr, statistics.mean(r["test"] for r in tot[lr])


def left_in_eval(model, batches):
    model.eval()
    with torch.no_grad():
        return torch.cat(
            [model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits.argmax(-1) for b in batches]
        )


def always_train_after(model, batches):
    model.eval()
    with torch.no_grad():
        out = torch.cat(
            [model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits.argmax(-1) for b in batches]
        )
    model.train()
    return out


def float_labels(model, batches):
    was = model.training
    model.eval()
    with torch.no_grad():
        out = torch.cat(
            [model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits.argmax(-1) for b in batches]
        )
    model.train(was)
    return out.float()


def as_list(model, batches):
    was = model.training
    model.eval()
    with torch.no_grad():
        out = [
            int(i)
            for b in batches
            for i in model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits.argmax(-1)
        ]
    model.train(was)
    return out


def no_attention_mask(model, batches):
    was = model.training
    model.eval()
    with torch.no_grad():
        out = torch.cat([model(input_ids=b["input_ids"]).logits.argmax(-1) for b in batches])
    model.train(was)
    return out


def reversed_batches(model, batches):
    was = model.training
    model.eval()
    with torch.no_grad():
        out = torch.cat(
            [
                model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits.argmax(-1)
                for b in reversed(batches)
            ]
        )
    model.train(was)
    return out


def keeps_grad(model, batches):
    was = model.training
    model.eval()
    out = torch.cat(
        [model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits.argmax(-1) for b in batches]
    )
    model.train(was)
    return out


def median_of_three_with_statistics(runs):
    tot = {}
    for r in runs:
        tot.setdefault(r["lr"], []).append(r)
    means = {lr: sum(r["dev"] for r in rs) / len(rs) for lr, rs in tot.items()}
    lr = sorted(means, key=lambda k: -means[k])[0]
    return lr, sum(r["test"] for r in tot[lr]) / len(tot[lr])


def head_with_linear_modules(h, pw, pb, cw, cb):
    pooler, classifier = torch.nn.Linear(*pw.shape[::-1]), torch.nn.Linear(*cw.shape[::-1])
    with torch.no_grad():
        pooler.weight.copy_(pw), pooler.bias.copy_(pb), classifier.weight.copy_(cw), classifier.bias.copy_(cb)
        return classifier(torch.tanh(pooler(h.narrow(-2, 0, 1).squeeze(-2))))


def predict_with_inference_mode_and_try(model, batches):
    was_training = model.training
    try:
        model.eval()
        with torch.inference_mode():
            return torch.cat([model(**batch).logits.argmax(-1) for batch in batches]).clone()
    finally:
        model.train(was_training)


REALISTIC_WRONG = [
    ("classification_logits", relu_pooler, "ReLU"),
    ("classification_logits", sigmoid_pooler, "sigmoid"),
    ("classification_logits", no_pooler_bias, "pooler's bias"),
    ("classification_logits", no_classifier_bias, "classifier's bias"),
    ("classification_logits", batched_only, "(seq, hidden)"),
    ("classification_logits", log_softmax_out, "log-probabilities"),
    ("choose_on_dev", by_sum, "largest sum"),
    ("choose_on_dev", best_dev_run_test, "reported accuracy"),
    ("choose_on_dev", reversed_tuple, "in the order"),
    ("choose_on_dev", percent, "multiplied by exactly 100"),
    ("choose_on_dev", first_seed_only, "learning rate"),
    ("choose_on_dev", median_dev, "best median"),
    ("predict_labels", left_in_eval, "another mode"),
    ("predict_labels", always_train_after, "another mode"),
    ("predict_labels", float_labels, "dtype torch.float32"),
    ("predict_labels", as_list, "a list"),
    ("predict_labels", no_attention_mask, "attention mask not passed"),
    ("predict_labels", reversed_batches, "another order"),
    ("predict_labels", keeps_grad, "gradients left on"),
]


@pytest.mark.parametrize(("name", "fn", "words"), REALISTIC_WRONG, ids=[fn.__name__ for _, fn, _ in REALISTIC_WRONG])
def test_a_realistic_wrong_answer_gets_a_message_that_names_what_fails(name, fn, words):
    result = check(name, fn)
    assert result.status == "wrong" and words in result.message, result.message


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("classification_logits", head_with_linear_modules),
        ("choose_on_dev", median_of_three_with_statistics),
        ("predict_labels", predict_with_inference_mode_and_try),
    ],
)
def test_more_correct_answers_are_accepted(name, fn):
    assert check(name, fn).status == "correct", check(name, fn).message


def span_with_invalid_spans_filled_with_zero(start_logits, end_logits, context_mask, max_answer_length):
    scores = start_logits.unsqueeze(-1) + end_logits.unsqueeze(-2)
    i = torch.arange(scores.shape[-1])
    ok = (i[None, :] >= i[:, None]) & (i[None, :] - i[:, None] < max_answer_length)
    ok = ok & context_mask.unsqueeze(-1) & context_mask.unsqueeze(-2)
    flat = scores.masked_fill(~ok, 0.0).flatten(-2).argmax(-1)  # 0 for an invalid span, not -inf
    return torch.stack([flat // scores.shape[-1], flat % scores.shape[-1]], dim=-1)


def span_with_a_large_negative_fill(start_logits, end_logits, context_mask, max_answer_length):
    scores = start_logits.unsqueeze(-1) + end_logits.unsqueeze(-2)
    i = torch.arange(scores.shape[-1])
    ok = (i[None, :] >= i[:, None]) & (i[None, :] - i[:, None] < max_answer_length)
    ok = ok & context_mask.unsqueeze(-1) & context_mask.unsqueeze(-2)
    flat = scores.masked_fill(~ok, -1e9).flatten(-2).argmax(-1)  # far below any span: right
    return torch.stack([flat // scores.shape[-1], flat % scores.shape[-1]], dim=-1)


def test_a_span_search_that_zeroes_invalid_spans_is_caught_where_every_span_scores_below_0():
    last = EXERCISES["best_span"].cases()[-1]  # the case that separates them: every span scores below 0
    assert float(last.args[0].amax() + last.args[1].amax()) < 0
    result = check("best_span", span_with_invalid_spans_filled_with_zero)
    assert result.mistake == "invalid spans given a score of 0 instead of left out", result.message
    assert check("best_span", span_with_a_large_negative_fill).status == "correct"
