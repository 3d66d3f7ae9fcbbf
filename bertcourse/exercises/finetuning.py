"""Exercises of notebook 10: ``classification_logits``, ``choose_on_dev``, ``predict_labels``, ``align_word_labels``
and ``best_span``.

The first three are the core of fine-tuning a classifier. Their mistakes: the head read from the mean of
the tokens, the last token or the raw [CLS] vector instead of the pooler, the pooler without its tanh or
with its weight untransposed, probabilities returned for logits; a learning rate chosen on the test set
or on one lucky run, the dev accuracy (or the best seed's test accuracy) reported; predictions made with
dropout still on, the batch's own labels returned, the argmax over the wrong axis, one batch forgotten.
The last two are the word-piece slips of fine-tuning: a word's label copied onto every piece (or
put on its last piece), special tokens labelled as words, labels read by piece position instead of
by word; an answer decoded from two separate argmaxes (its end may come before its start), without
a maximum length or one token too long, spilling into the question, a one-token answer refused, an
end returned one past the answer.
"""

from __future__ import annotations

import torch

from ..config import BertConfig
from ..finetuning import (
    BertForSequenceClassification,
    align_word_labels,
    best_span,
    classification_logits,
    predict_labels,
)
from ..finetuning.table import choose_on_dev
from ..heads import IGNORE_INDEX
from .diagnosis import equals_one_of
from .random_inputs import seeded_randn
from .records import Case, Exercise, Knob, Mistake

# --- classification_logits ---------------------------------------------------------------------


def _head_case(g, shape, num_labels):
    hidden = shape[-1]
    return (
        seeded_randn(g, *shape),
        seeded_randn(g, hidden, hidden)
        / hidden**0.5
        * 2,  # pre-activations of about unit size: tanh is not linear there
        seeded_randn(g, hidden) * 0.5,
        seeded_randn(g, num_labels, hidden),
        seeded_randn(g, num_labels),
    )


def _head_cases(g):
    return [
        Case("a batch of 3 reviews of 5 tokens, hidden 8, 2 labels", _head_case(g, (3, 5, 8), 2), ("batched",)),
        Case("one review of 6 tokens (seq, hidden), hidden 8, 2 labels", _head_case(g, (6, 8), 2), ("unbatched",)),
        Case("a batch of 2 of 4 tokens, hidden 6, 3 labels", _head_case(g, (2, 4, 6), 3), ("batched", "non-square")),
    ]


def _head(vector, pooler_weight, pooler_bias, classifier_weight, classifier_bias, activation=torch.tanh):
    return activation(vector @ pooler_weight.T + pooler_bias) @ classifier_weight.T + classifier_bias


def _head_mean_of_tokens(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    return _head(hidden_states.mean(dim=-2), pooler_weight, pooler_bias, classifier_weight, classifier_bias)


def _head_last_token(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    return _head(hidden_states[..., -1, :], pooler_weight, pooler_bias, classifier_weight, classifier_bias)


def _head_no_tanh(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    cls = hidden_states[..., 0, :]
    return _head(cls, pooler_weight, pooler_bias, classifier_weight, classifier_bias, activation=lambda x: x)


def _head_no_pooler(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    return hidden_states[..., 0, :] @ classifier_weight.T + classifier_bias


def _head_pooler_not_transposed(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    return _head(hidden_states[..., 0, :], pooler_weight.T, pooler_bias, classifier_weight, classifier_bias)


def _head_softmax(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    return classification_logits(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias).softmax(
        dim=-1
    )


def _head_variant(settings, hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    """BERT's classifier head with each part chosen by ``settings`` (the knobs below)."""
    vector = {"first": lambda: hidden_states[..., 0, :], "mean": lambda: hidden_states.mean(dim=-2)}[
        settings["vector"]
    ]()  # (..., hidden)
    pooled = vector @ pooler_weight.T + (pooler_bias if settings["pooler bias"] else 0)  # (..., hidden)
    pooled = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid, "none": lambda x: x}[
        settings["activation"]
    ](pooled)
    logits = pooled @ classifier_weight.T + (classifier_bias if settings["classifier bias"] else 0)  # (..., labels)
    return {"logits": logits, "log_softmax": logits.log_softmax(dim=-1)}[settings["output"]]


_HEAD_KNOBS = (
    Knob(
        "vector",
        (
            ("first", "", ""),
            ("mean", "the mean of the token vectors", "BERT's pooler reads the first token's vector, [CLS]."),
        ),
    ),
    Knob(
        "pooler bias",
        (
            (True, "", ""),
            (False, "the pooler's bias left out", "the pooler is a whole `nn.Linear`: W_p h + b_p."),
        ),
    ),
    Knob(
        "activation",
        (
            ("tanh", "", ""),
            ("relu", "a ReLU in the pooler instead of tanh", "BERT's pooler squashes with tanh, into (-1, 1)."),
            ("sigmoid", "a sigmoid in the pooler instead of tanh", "BERT's pooler squashes with tanh, into (-1, 1)."),
            ("none", "the pooler without its tanh", "the pooled vector is tanh(W_p h + b_p)."),
        ),
    ),
    Knob(
        "classifier bias",
        (
            (True, "", ""),
            (False, "the classifier's bias left out", "the classifier is an `nn.Linear` too: W_c p + b_c."),
        ),
    ),
    Knob(
        "output",
        (
            ("logits", "", ""),
            ("log_softmax", "log-probabilities instead of logits", "return the scores before any (log-)softmax."),
        ),
    ),
)


def _logits_explain(case, value, expected):
    """Which other vector or activation the learner's head used."""
    hidden, pooler_weight, pooler_bias, classifier_weight, classifier_bias = case.args

    def head(vector, activation=torch.tanh):
        return activation(vector @ pooler_weight.T + pooler_bias) @ classifier_weight.T + classifier_bias

    return equals_one_of(
        value,
        expected,
        (
            (
                "the head on the maximum over the tokens: BERT's classifier reads the [CLS] vector, position 0",
                lambda: head(hidden.amax(dim=-2)),
            ),
            ("the head on the vector at position 1: [CLS] is at position 0", lambda: head(hidden[..., 1, :])),
            (
                "the head with GELU in the pooler: the pooler's activation is tanh",
                lambda: head(hidden[..., 0, :], torch.nn.functional.gelu),
            ),
        ),
    )


CLASSIFICATION_LOGITS = Exercise(
    name="classification_logits",
    reference=classification_logits,
    prompt="your function receives `hidden_states`, the encoder's last hidden states (batch, seq, hidden) or "
    "(seq, hidden), and the head's weights as `nn.Linear` stores them: `pooler_weight` (hidden, hidden), "
    "`pooler_bias` (hidden,), `classifier_weight` (num_labels, hidden), `classifier_bias` (num_labels,); it "
    "returns the logits of BERT's sentence classifier in eval mode, (batch, num_labels) or (num_labels,).",
    start="section 2 wrote the head as two formulas: find which position of `hidden_states` the first one reads.",
    make_cases=_head_cases,
    knobs=_HEAD_KNOBS,
    variant=_head_variant,
    axes={"": ("labels",)},
    explain=_logits_explain,
    notebook="10",
    mistakes=(
        Mistake(
            "the mean of the token vectors instead of the [CLS] vector",
            "mean pooling is what the frozen MiniLM was read with; BERT's pooler reads one vector, the first "
            "token's, `hidden_states[..., 0, :]`.",
            _head_mean_of_tokens,
        ),
        Mistake(
            "the last token's vector",
            "[CLS] is the *first* token of `[CLS] A [SEP]`; the last one is [SEP] (or padding).",
            _head_last_token,
        ),
        Mistake(
            "the pooler without its tanh",
            "the pooled vector is tanh(W_p h + b_p): the squashing is part of BERT's pooler.",
            _head_no_tanh,
        ),
        Mistake(
            "the classifier on the raw [CLS] vector, without the pooler",
            "BERT's classifier reads the pooled vector, not h_[CLS] itself: apply the pooler first.",
            _head_no_pooler,
        ),
        Mistake(
            "the pooler's weight used untransposed",
            "`nn.Linear` stores its weight as (out, in) and computes x @ W.T + b; the pooler's square weight "
            "fits either way, so only the numbers show it.",
            _head_pooler_not_transposed,
        ),
        Mistake(
            "probabilities instead of logits",
            "return the scores before any softmax: the loss (cross-entropy) takes logits.",
            _head_softmax,
        ),
    ),
)

# --- choose_on_dev -------------------------------------------------------------------------------


def _runs(table):
    """(lr, seed, dev, test) rows -> the list of dicts the exercise receives."""
    return [{"lr": lr, "seed": seed, "dev": dev, "test": test} for lr, seed, dev, test in table]


def _choose_cases(g):
    return [
        Case(
            "three rates, three seeds each: 3e-4 is best on dev on average, 1e-3 on test, one 1e-3 run on dev",
            (
                _runs(
                    [
                        (1e-4, 0, 0.70, 0.69),
                        (1e-4, 1, 0.71, 0.70),
                        (1e-4, 2, 0.69, 0.70),
                        (3e-4, 0, 0.76, 0.74),
                        (3e-4, 1, 0.75, 0.72),
                        (3e-4, 2, 0.77, 0.75),
                        (1e-3, 0, 0.79, 0.77),
                        (1e-3, 1, 0.66, 0.76),
                        (1e-3, 2, 0.70, 0.77),
                    ]
                ),
            ),
        ),
        Case(
            "two rates, two seeds, listed seed by seed: 1e-3 wins on dev, 3e-4 on test",
            (
                _runs(
                    [
                        (3e-4, 0, 0.60, 0.66),
                        (1e-3, 0, 0.63, 0.61),
                        (3e-4, 1, 0.62, 0.64),
                        (1e-3, 1, 0.64, 0.59),
                    ]
                ),
            ),
        ),
        Case(
            "two rates, a run of 3e-4 missing: 3e-4 has the best mean dev accuracy, 1e-3 the largest sum",
            (
                _runs(
                    [
                        (3e-4, 0, 0.72, 0.69),
                        (3e-4, 2, 0.73, 0.70),
                        (1e-3, 0, 0.70, 0.73),
                        (1e-3, 1, 0.69, 0.74),
                        (1e-3, 2, 0.70, 0.72),
                    ]
                ),
            ),
        ),
        Case(
            "two rates, three seeds: 1e-3 has the best mean dev accuracy, 3e-4 the best median",
            (
                _runs(
                    [
                        (3e-4, 0, 0.70, 0.69),
                        (3e-4, 1, 0.71, 0.70),
                        (3e-4, 2, 0.55, 0.55),
                        (1e-3, 0, 0.69, 0.73),
                        (1e-3, 1, 0.68, 0.72),
                        (1e-3, 2, 0.69, 0.71),
                    ]
                ),
            ),
        ),
        Case(
            "four rates, one seed each",
            (_runs([(1e-5, 0, 0.58, 0.57), (3e-5, 0, 0.66, 0.68), (1e-4, 0, 0.71, 0.69), (3e-4, 0, 0.69, 0.72)]),),
        ),
    ]


def _by_rate(runs):
    groups = {}
    for run in runs:
        groups.setdefault(run["lr"], []).append(run)
    return groups


def _mean(values):
    values = list(values)
    return sum(values) / len(values)


def _choose_on_test(runs):
    groups = _by_rate(runs)
    chosen = max(groups, key=lambda lr: _mean(run["test"] for run in groups[lr]))
    return chosen, _mean(run["test"] for run in groups[chosen])


def _choose_best_single_run(runs):
    chosen = max(runs, key=lambda run: run["dev"])["lr"]
    return chosen, _mean(run["test"] for run in _by_rate(runs)[chosen])


def _choose_reports_dev(runs):
    chosen, _ = choose_on_dev(runs)
    return chosen, _mean(run["dev"] for run in _by_rate(runs)[chosen])


def _choose_reports_best_seed(runs):
    chosen, _ = choose_on_dev(runs)
    return chosen, max(run["test"] for run in _by_rate(runs)[chosen])


def _choose_reports_every_rate(runs):
    chosen, _ = choose_on_dev(runs)
    return chosen, _mean(run["test"] for run in runs)


def _choose_lowest_dev(runs):
    groups = _by_rate(runs)
    chosen = min(groups, key=lambda lr: _mean(run["dev"] for run in groups[lr]))
    return chosen, _mean(run["test"] for run in groups[chosen])


CHOOSE_ON_DEV = Exercise(
    name="choose_on_dev",
    reference=choose_on_dev,
    prompt="your function receives `runs`, a list of dicts, one per fine-tuning run, each with the keys 'lr' (its "
    "learning rate), 'seed', 'dev' and 'test' (its accuracy on the dev and on the test reviews); it returns a "
    "tuple (the chosen learning rate, the accuracy to report for it), chosen and reported as section 5 did over "
    "the seeds of each rate.",
    start="group the runs by their 'lr' first; then ask which of the two sets may make the choice.",
    make_cases=_choose_cases,
    outputs=("learning rate", "reported accuracy"),
    notebook="10",
    mistakes=(
        Mistake(
            "the rate chosen on the test accuracy",
            "the test set reports, it never chooses: a rate picked for its test accuracy has been tuned on the "
            "test set, and its test figure flatters it. Choose on 'dev'.",
            _choose_on_test,
        ),
        Mistake(
            "the rate of the single best dev run",
            "one run can be lucky: average each rate's dev accuracy over its seeds, then take the best mean.",
            _choose_best_single_run,
        ),
        Mistake(
            "the dev accuracy reported",
            "the dev accuracy made the choice, so it is biased upwards; report the chosen rate's *test* accuracy.",
            _choose_reports_dev,
        ),
        Mistake(
            "the best seed's test accuracy reported",
            "report the mean test accuracy over the chosen rate's seeds, not the luckiest one.",
            _choose_reports_best_seed,
        ),
        Mistake(
            "the test accuracy averaged over every rate",
            "report the runs of the chosen rate only: the other rates are not the model you would use.",
            _choose_reports_every_rate,
        ),
        Mistake(
            "the rate of the lowest dev accuracy",
            "take the highest mean dev *accuracy* (the lowest would be right for a dev *loss*).",
            _choose_lowest_dev,
        ),
    ),
)

# --- predict_labels ------------------------------------------------------------------------------


class _ClassifierThatNotices(BertForSequenceClassification):
    """The cases' classifier, a probe: asked with gradients on (a judged model is asked without them), or
    without the attention mask of a padded batch, it answers the other label. A model this tiny barely reads
    its padding, so without the probe those two slips would pass unseen; with it they come out wrong and
    can be named."""

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        output = super().forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        if torch.is_grad_enabled():
            output.logits = output.logits.flip(-1)  # (batch, 2): every answer swapped
        if attention_mask is None:
            padded = (input_ids == 0).any(dim=-1, keepdim=True)  # (batch, 1): [PAD] is id 0 in the cases
            output.logits = torch.where(padded, output.logits.flip(-1), output.logits)  # the padded ones swapped
        return output


def _predict_model(training: bool):
    config = BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        hidden_dropout_prob=0.5,  # large, so that dropout left on changes the answers
    )
    torch.manual_seed(0)
    model = _ClassifierThatNotices(config, num_labels=2)
    with torch.no_grad():
        model.classifier.weight.mul_(30.0)  # a decided classifier: labels vary from review to review
    return model.train(training)


def _predict_batches(g, sizes, seq=6):
    batches = []
    for size in sizes:
        ids = torch.randint(5, 40, (size, seq), generator=g)
        mask = torch.ones(size, seq, dtype=torch.long)
        mask[0, seq - 2 :] = 0  # the first review of each batch is shorter: padded
        ids[0, seq - 2 :] = 0
        labels = torch.randint(0, 2, (size,), generator=g)
        batches.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return batches


def _predict_cases(g):
    return [
        Case("a model in eval mode, batches of 3 and 2 reviews", (_predict_model(False), _predict_batches(g, (3, 2)))),
        Case(
            "a model in training mode (as training leaves it), batches of 4, 4 and 1",
            (_predict_model(True), _predict_batches(g, (4, 4, 1))),
            ("batched",),
        ),
        Case(
            "a model in training mode, one batch of 6", (_predict_model(True), _predict_batches(g, (6,))), ("batched",)
        ),
    ]


def _predict_dropout_on(model, batches):
    with torch.no_grad():
        return torch.cat([model(**batch).logits.argmax(dim=-1) for batch in batches])


def _predict_labels_of_the_batches(model, batches):
    return torch.cat([batch["labels"] for batch in batches])


def _predict_probabilities(model, batches):
    model.eval()
    with torch.no_grad():
        return torch.cat([model(**batch).logits.softmax(dim=-1) for batch in batches])


def _predict_argmax_over_examples(model, batches):
    model.eval()
    with torch.no_grad():
        return torch.cat([model(**batch).logits.argmax(dim=0) for batch in batches])


def _predict_with_gradients(model, batches):
    model.eval()
    return torch.cat([model(**batch).logits.argmax(dim=-1) for batch in batches])


def _predict_without_mask(model, batches):
    model.eval()
    with torch.no_grad():
        return torch.cat([model(input_ids=batch["input_ids"]).logits.argmax(dim=-1) for batch in batches])


def _predict_last_batch_only(model, batches):
    model.eval()
    with torch.no_grad():
        for batch in batches:
            predictions = model(**batch).logits.argmax(dim=-1)
    return predictions


PREDICT_LABELS = Exercise(
    name="predict_labels",
    reference=predict_labels,
    prompt="your function receives `model`, a sequence classifier (it may be in training mode, as "
    "`training.train` leaves it), and `batches`, a list of dicts of the model's inputs (input_ids, "
    "attention_mask, labels); it returns a long tensor (n,) with the predicted label of every example of "
    "every batch, in order, computed as a judged model must be, without gradients, and leaves the model in "
    "the mode it found it in.",
    start="pitfall 2 showed what a model in training mode does to the same question asked twice.",
    make_cases=_predict_cases,
    axes={"": ("examples",)},
    notebook="10",
    mistakes=(
        Mistake(
            "dropout left on (no `model.eval()`)",
            "in training mode dropout zeroes activations at random, so the predictions are noisy: call "
            "`model.eval()` before predicting, and `model.train(was_training)` afterwards.",
            _predict_dropout_on,
        ),
        Mistake(
            "the batches' own labels returned",
            "`batch['labels']` is the truth; the prediction is the argmax of the model's logits.",
            _predict_labels_of_the_batches,
        ),
        Mistake(
            "probabilities instead of labels",
            "a label is one int per example: the argmax of the logits over the labels axis.",
            _predict_probabilities,
        ),
        Mistake(
            "the argmax over the examples instead of over the labels",
            "logits are (batch, num_labels): take the argmax over the last axis, `dim=-1`.",
            _predict_argmax_over_examples,
        ),
        Mistake(
            "gradients left on",
            "a judged model is asked without building a graph: wrap the forward passes in `torch.no_grad()` "
            "(or `torch.inference_mode()`); the cases' model answers differently when asked with gradients on.",
            _predict_with_gradients,
        ),
        Mistake(
            "the attention mask not passed",
            "pass every input of the batch (`model(**batch)`, or `attention_mask=`): without the mask a padded "
            "review reads its padding (the cases' model answers differently then).",
            _predict_without_mask,
        ),
        Mistake(
            "only the last batch predicted",
            "collect every batch's predictions and join them (`torch.cat`), in order.",
            _predict_last_batch_only,
        ),
    ),
)

# --- align_word_labels ---------------------------------------------------------------------------


def _align_cases(g):
    return [
        Case("[CLS] w0 w1 w1 w2 [SEP]: word 1 in two pieces", ([None, 0, 1, 1, 2, None], [0, 1, 2])),
        Case(
            "word 0 in three pieces, then padding",
            ([None, 0, 0, 0, 1, 2, None, None, None], [1, 0, 2]),
            ("masked",),
        ),
        Case(
            "word 0 has no label (-100), words 1 and 3 in two pieces", ([None, 0, 1, 1, 2, 3, 3, None], [-100, 1, 2, 0])
        ),
        Case("every word one piece", ([None, 0, 1, 2, None], [2, 0, 1])),
        Case("truncated: word 2 did not fit", ([None, 0, 1, 1, None], [1, 2, 0])),
    ]


def _pieces_labelled(word_ids, word_labels, first_only, specials):
    labels, previous = [], None
    for word in word_ids:
        if word is None:
            labels.append(specials)
        elif first_only(word, previous):
            labels.append(word_labels[word])
        else:
            labels.append(IGNORE_INDEX)
        previous = word
    return torch.tensor(labels)


def _align_every_piece(word_ids, word_labels):
    return _pieces_labelled(word_ids, word_labels, lambda word, previous: True, IGNORE_INDEX)


def _align_last_piece(word_ids, word_labels):
    following = [*word_ids[1:], None]
    labels = [
        IGNORE_INDEX if word is None or word == after else word_labels[word]
        for word, after in zip(word_ids, following, strict=True)
    ]
    return torch.tensor(labels)


def _align_specials_labelled_o(word_ids, word_labels):
    return _pieces_labelled(word_ids, word_labels, lambda word, previous: word != previous, 0)


def _align_by_position(word_ids, word_labels):
    labels = [IGNORE_INDEX] * len(word_ids)
    for piece in range(1, len(word_ids)):
        if word_ids[piece] is not None and piece - 1 < len(word_labels):
            labels[piece] = word_labels[piece - 1]  # piece i read as word i - 1
    return torch.tensor(labels)


_ORDINALS = ("first", "second", "third", "fourth", "fifth")


def _explain_align(case, value, expected):
    """What the first wrong piece is (no word, a word's first piece or a later one) and what it should get."""
    word_ids, word_labels = case.args[:2]
    if not isinstance(value, torch.Tensor):
        return None
    if value.shape != expected.shape:
        words = sum(word is not None for word in word_ids)
        if value.dim() == 1 and len(value) == words:
            return (
                f"Yours has one entry per piece that is a word ({words}); the output has one per piece, [CLS], "
                f"[SEP] and padding included ({len(word_ids)}), with -100 on those."
            )
        return None
    wrong = (value != expected).nonzero()
    if not len(wrong):
        return None
    piece = int(wrong[0, 0])
    word = word_ids[piece]
    yours, right = int(value[piece]), int(expected[piece])
    if word is None:
        what = "is no word ([CLS], [SEP] or padding: word id None)"
    else:
        nth = sum(w == word for w in word_ids[:piece])
        order = _ORDINALS[nth] if nth < len(_ORDINALS) else f"{nth + 1}th"
        what = f"is the {order} piece of word {word}"
        if nth == 0:
            what += f", whose label is {word_labels[word]}"
    later = word is not None and sum(w == word for w in word_ids[:piece]) > 0
    why = " (only a word's first piece carries its label)" if later and right == IGNORE_INDEX else ""
    return f"Piece {piece} {what}: it gets {right}{why}; yours is {yours}."


ALIGN_WORD_LABELS = Exercise(
    name="align_word_labels",
    reference=align_word_labels,
    prompt="your function receives `word_ids`, a list with one entry per word piece (the index of the word the "
    "piece comes from, or None for [CLS], [SEP] and padding), and `word_labels`, a list of ints, one label per "
    "word (-100 for a word without a label); it returns a long tensor (n_pieces,): each word's label on its "
    "first piece, and -100 on the word's other pieces and on every piece that is no word.",
    start="walk through `word_ids` keeping the previous entry: a piece starts a word when its id is not None "
    "and differs from the previous one.",
    make_cases=_align_cases,
    axes={"": ("pieces",)},
    explain=_explain_align,
    notebook="10",
    mistakes=(
        Mistake(
            "the word's label on every one of its pieces",
            "only a word's first piece carries its label; give its other pieces -100, or a long word counts "
            "several times in the loss and one name is read back as several.",
            _align_every_piece,
        ),
        Mistake(
            "the label on the word's last piece",
            "label the *first* piece of each word (the piece whose word id differs from the previous piece's).",
            _align_last_piece,
        ),
        Mistake(
            "[CLS], [SEP] and padding labelled 0 (a real class)",
            "a piece that is no word (word id None) gets -100, so that the loss skips it.",
            _align_specials_labelled_o,
        ),
        Mistake(
            "labels read by piece position (piece i gets the label of word i - 1)",
            "look the label up by the piece's word id, `word_labels[word_ids[i]]`: after a word of two pieces, "
            "pieces and words no longer line up.",
            _align_by_position,
        ),
    ),
)

# --- best_span -----------------------------------------------------------------------------------


def _span_case(g, seq, question, max_len, plants, batch=None, empty_rows=(), shift=0.0):
    """Random logits for [CLS] question [SEP] passage [SEP] with planted values (row, 'start'/'end', pos, value);
    ``shift`` is added to every logit (a negative one: every span, the best valid one too, scores below 0)."""
    shape = (seq,) if batch is None else (batch, seq)
    start, end = seeded_randn(g, *shape) + shift, seeded_randn(g, *shape) + shift
    mask = torch.zeros(shape, dtype=torch.bool)
    mask[..., question + 2 : seq - 1] = True  # the passage: after [CLS] question [SEP], before the last [SEP]
    for row in empty_rows:
        mask[row] = False
    for row, which, position, value in plants:
        target = start if which == "start" else end
        if batch is None:
            target[position] = value
        else:
            target[row, position] = value
    return (start, end, mask, max_len)


def _span_cases(g):
    return [
        Case(
            "one input of 12 tokens (question 3), at most 4 tokens: the end's argmax lies before the best start",
            _span_case(g, 12, 3, 4, [(0, "start", 8, 4.0), (0, "end", 6, 5.0), (0, "end", 9, 3.5)]),
            ("unbatched",),
        ),
        Case(
            "a batch of 3 x 16 (question 4), at most 3 tokens: the question and a long span tempt",
            batch_of_three := _span_case(
                g,
                16,
                4,
                3,
                [
                    (0, "start", 2, 9.0),
                    (0, "end", 3, 9.0),
                    (0, "start", 7, 3.0),
                    (0, "end", 8, 3.0),
                    (1, "start", 7, 4.0),
                    (1, "end", 11, 6.0),
                    (1, "end", 9, 3.0),
                    (2, "start", 10, 4.0),
                    (2, "end", 13, 4.5),
                    (2, "end", 12, 4.0),
                ],
                batch=3,
            ),
            ("batched",),
        ),
        Case(
            "one input of 10 tokens, at most 5 tokens: a one-token answer is best; the last [SEP] tempts the end",
            _span_case(g, 10, 2, 5, [(0, "start", 6, 6.0), (0, "end", 6, 6.0), (0, "end", 9, 8.0)]),
            ("unbatched",),
        ),
        Case(
            "a batch of 2 x 9, the second input has no passage token: its answer is [0, 0]",
            _span_case(g, 9, 2, 4, [(0, "start", 5, 4.0), (0, "end", 6, 4.0), (1, "start", 3, 5.0)], 2, (1,)),
            ("batched", "fully masked row"),
        ),
        Case(
            "input 1 of the batch of 3 x 16 alone, without a batch axis",
            tuple(arg[1] if isinstance(arg, torch.Tensor) else arg for arg in batch_of_three),
            ("unbatched",),
        ),
        Case(
            "a batch of 2 x 12 (question 3), at most 4 tokens: every logit below -3, so every span, the best valid "
            "one too, scores below 0",
            _span_case(
                g,
                12,
                3,
                4,
                [(0, "start", 7, -1.0), (0, "end", 8, -1.5), (1, "start", 9, -1.0), (1, "end", 9, -1.0)],
                batch=2,
                shift=-6.0,
            ),
            ("batched",),
        ),
    ]


def _span_search(start_logits, end_logits, context_mask, valid_length, start_mask, end_mask):
    seq = start_logits.shape[-1]
    scores = start_logits[..., :, None] + end_logits[..., None, :]
    i = torch.arange(seq)
    length = i[None, :] - i[:, None] + 1
    valid = valid_length(length) & start_mask[..., :, None] & end_mask[..., None, :]
    best = scores.masked_fill(~valid, float("-inf")).flatten(-2).argmax(dim=-1)
    return torch.stack([best // seq, best % seq], dim=-1)


def _span_two_argmaxes(start_logits, end_logits, context_mask, max_answer_length):
    start = start_logits.masked_fill(~context_mask, float("-inf")).argmax(dim=-1)
    end = end_logits.masked_fill(~context_mask, float("-inf")).argmax(dim=-1)
    return torch.stack([start, end], dim=-1)


def _span_no_max_length(start_logits, end_logits, context_mask, max_answer_length):
    return _span_search(start_logits, end_logits, context_mask, lambda n: n >= 1, context_mask, context_mask)


def _span_one_token_too_long(start_logits, end_logits, context_mask, max_answer_length):
    return _span_search(
        start_logits,
        end_logits,
        context_mask,
        lambda n: (n >= 1) & (n <= max_answer_length + 1),
        context_mask,
        context_mask,
    )


def _span_question_allowed(start_logits, end_logits, context_mask, max_answer_length):
    anywhere = torch.ones_like(context_mask)
    return _span_search(
        start_logits, end_logits, context_mask, lambda n: (n >= 1) & (n <= max_answer_length), anywhere, anywhere
    )


def _span_end_not_masked(start_logits, end_logits, context_mask, max_answer_length):
    return _span_search(
        start_logits,
        end_logits,
        context_mask,
        lambda n: (n >= 1) & (n <= max_answer_length),
        context_mask,
        torch.ones_like(context_mask),
    )


def _span_one_token_refused(start_logits, end_logits, context_mask, max_answer_length):
    return _span_search(
        start_logits,
        end_logits,
        context_mask,
        lambda n: (n >= 2) & (n <= max_answer_length),
        context_mask,
        context_mask,
    )


def _span_invalid_zeroed(start_logits, end_logits, context_mask, max_answer_length):
    seq = start_logits.shape[-1]
    scores = start_logits[..., :, None] + end_logits[..., None, :]
    i = torch.arange(seq)
    length = i[None, :] - i[:, None] + 1
    valid = (length >= 1) & (length <= max_answer_length) & context_mask[..., :, None] & context_mask[..., None, :]
    best = (scores * valid).flatten(-2).argmax(dim=-1)  # an invalid span scores 0, above a valid one below 0
    return torch.stack([best // seq, best % seq], dim=-1)


def _span_end_exclusive(start_logits, end_logits, context_mask, max_answer_length):
    spans = best_span(start_logits, end_logits, context_mask, max_answer_length)
    return spans + torch.tensor([0, 1])


def _explain_span(case, value, expected):
    """What the learner's span of the first wrong input is: invalid (and why), or valid with a lower score."""
    start_logits, end_logits, context_mask, max_len = case.args
    if not isinstance(value, torch.Tensor) or value.shape != expected.shape or value.is_floating_point():
        return None
    mine, right = value.reshape(-1, 2), expected.reshape(-1, 2)
    starts, ends = start_logits.reshape(-1, start_logits.shape[-1]), end_logits.reshape(-1, end_logits.shape[-1])
    masks = context_mask.reshape(-1, context_mask.shape[-1])
    row = int((mine != right).any(dim=-1).nonzero()[0, 0])
    (i, j), (ri, rj) = mine[row].tolist(), right[row].tolist()
    where = f" (input {row})" if value.dim() > 1 else ""
    seq = masks.shape[-1]
    if not bool(masks[row].any()):
        return f"This input{where} has no passage token: its answer is [0, 0]."
    if not (0 <= i < seq and 0 <= j < seq):
        return f"Your span{where} [{i}, {j}] is not a pair of positions 0 to {seq - 1}."
    problems = []
    if i > j:
        problems.append("starts after it ends")
    elif j - i + 1 > max_len:
        problems.append(f"has {j - i + 1} tokens, more than max_answer_length = {max_len}")
    if not (bool(masks[row, i]) and bool(masks[row, j])):
        problems.append("has an end outside the passage")
    if problems:
        return f"Your span{where} [{i}, {j}] {' and '.join(problems)}."
    score, best = float(starts[row, i] + ends[row, j]), float(starts[row, ri] + ends[row, rj])
    length = rj - ri + 1
    allowed = f" (it has {length} tokens, and up to max_answer_length = {max_len} are allowed)" if length > 1 else ""
    return (
        f"Your span{where} [{i}, {j}] is valid and scores start_logit + end_logit = {score:.4g}; [{ri}, {rj}] "
        f"scores {best:.4g}{allowed}."
    )


BEST_SPAN = Exercise(
    name="best_span",
    reference=best_span,
    prompt="your function receives `start_logits` and `end_logits`, float tensors (..., seq), `context_mask`, a "
    "bool tensor (..., seq) True at the passage's tokens, and `max_answer_length`, an int; it returns a long "
    "tensor (..., 2): for each input the [start, end] (end included) of the span with the highest "
    "start_logit + end_logit among the valid ones: start <= end, at most `max_answer_length` tokens, both ends "
    "in the passage. An input without a passage token gets [0, 0].",
    start="`scores = start_logits[..., :, None] + end_logits[..., None, :]` scores every span (i, j); set the "
    "invalid ones to -inf and take the argmax of `scores.flatten(-2)`.",
    make_cases=_span_cases,
    axes={"": ("[start, end]",)},
    explain=_explain_span,
    notebook="10",
    mistakes=(
        Mistake(
            "two separate argmaxes (the end may come before the start)",
            "score every span (i, j) with start_logits[i] + end_logits[j] and keep only j >= i: the best end "
            "alone may lie before the best start.",
            _span_two_argmaxes,
        ),
        Mistake(
            "no maximum answer length",
            "a span (i, j) has j - i + 1 tokens; spans longer than `max_answer_length` are not answers.",
            _span_no_max_length,
        ),
        Mistake(
            "answers one token longer than `max_answer_length`",
            "a span (i, j) has j - i + 1 tokens, not j - i: keep j - i + 1 <= max_answer_length.",
            _span_one_token_too_long,
        ),
        Mistake(
            "spans in the question (or on [CLS] and [SEP])",
            "both ends must be passage tokens: `context_mask[..., :, None] & context_mask[..., None, :]`.",
            _span_question_allowed,
        ),
        Mistake(
            "only the start kept inside the passage",
            "the end must be a passage token too, or an answer can run into the final [SEP].",
            _span_end_not_masked,
        ),
        Mistake(
            "a one-token answer refused (start < end)",
            "start == end is a valid answer of one token: keep j >= i, not j > i.",
            _span_one_token_refused,
        ),
        Mistake(
            "the end one past the answer",
            "here `end` is the answer's last token (included), as Hugging Face's `end_positions`.",
            _span_end_exclusive,
        ),
        Mistake(
            "invalid spans given a score of 0 instead of left out",
            "multiplying the scores by the valid mask (or `masked_fill(~valid, 0)`) gives every invalid span 0, "
            "which beats a best valid span that scores below 0, as logits often do: fill them with "
            "`float('-inf')`.",
            _span_invalid_zeroed,
        ),
    ),
)
