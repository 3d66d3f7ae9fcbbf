"""The fine-tuning heads equal Hugging Face's task models on the same random weights, both ways."""

from __future__ import annotations

import json

import pytest
import torch

import bertcourse as bc
from bertcourse.finetuning import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

ODD = bc.BertConfig(
    vocab_size=211,
    hidden_size=96,
    num_hidden_layers=3,
    num_attention_heads=3,
    intermediate_size=130,
    max_position_embeddings=32,
    type_vocab_size=3,
)
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def batch():
    g = torch.Generator().manual_seed(3)
    input_ids = torch.randint(0, ODD.vocab_size, (3, 12), generator=g)  # (batch, seq)
    attention_mask = torch.ones(3, 12, dtype=torch.long)
    attention_mask[2, 7:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": torch.zeros_like(input_ids)}


def randomised(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.1)
    return model.eval()


CASES = [
    (BertForSequenceClassification, {"num_labels": 3}, "logits", {"labels": torch.tensor([0, 2, 1])}),
    (
        BertForTokenClassification,
        {"num_labels": 5, "label_names": LABELS},
        "logits",
        {"labels": torch.tensor([[-100] + [1, 2, 0, 0, 3, 4, 0, 0, 0, 0] + [-100]] * 3)},
    ),
    (
        BertForQuestionAnswering,
        {},
        "start_logits",
        {"start_positions": torch.tensor([3, 5, 40]), "end_positions": torch.tensor([4, 9, 40])},  # 40: past the end
    ),
]


IDS = [case[0].__name__ for case in CASES]


@pytest.mark.parametrize("cls, kwargs, output, targets", CASES, ids=IDS)
def test_ours_to_hugging_face_same_logits_and_loss(tmp_path, cls, kwargs, output, targets):
    ours = randomised(cls(ODD, **kwargs))
    ours.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == [cls.__name__]
    theirs = getattr(transformers, cls.__name__).from_pretrained(tmp_path, attn_implementation="eager").eval()
    if "label_names" in kwargs:
        assert theirs.config.id2label == dict(enumerate(LABELS))
    with torch.no_grad():
        a, b = ours(**batch(), **targets), theirs(**batch(), **targets)
    torch.testing.assert_close(getattr(a, output), getattr(b, output), atol=1e-5, rtol=0)
    torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=0)
    if cls is BertForQuestionAnswering:
        torch.testing.assert_close(a.end_logits, b.end_logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("cls, kwargs, output, targets", CASES, ids=IDS)
def test_hugging_face_to_ours_reads_the_head_and_its_labels(tmp_path, cls, kwargs, output, targets):
    hf_kwargs = {"num_labels": kwargs.get("num_labels", 2)}
    if "label_names" in kwargs:
        hf_kwargs["id2label"] = dict(enumerate(LABELS))
    hf_config = transformers.BertConfig(**vars(ODD), **hf_kwargs, attn_implementation="eager")
    theirs = randomised(getattr(transformers, cls.__name__)(hf_config))
    theirs.save_pretrained(tmp_path)
    ours = cls.from_pretrained(tmp_path)
    assert ours.newly_initialized == []
    if "label_names" in kwargs:
        assert ours.label_names == LABELS
    with torch.no_grad():
        a, b = ours(**batch()), theirs(**batch())
    torch.testing.assert_close(getattr(a, output), getattr(b, output), atol=1e-5, rtol=0)


def test_a_classifier_on_the_pretrained_encoder_starts_its_head_fresh():
    model = BertForSequenceClassification.from_pretrained(bc.pretrained.default_weights_dir(), num_labels=2)
    assert model.newly_initialized == ["classifier.bias", "classifier.weight"]  # sorted
    token_model = BertForTokenClassification.from_pretrained(bc.pretrained.default_weights_dir(), num_labels=3)
    assert token_model.bert.pooler is None  # MiniLM's pooler weights are left out, as Hugging Face does


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: BertForSequenceClassification(ODD, num_labels=1), ValueError, r"`num_labels` must be at least 2"),
        (
            lambda: BertForTokenClassification(ODD, num_labels=3, label_names=["O", "B"]),
            ValueError,
            r"`label_names` must name each of the 3 classes once",
        ),
        (
            lambda: BertForSequenceClassification(ODD, num_labels=3)(**batch(), labels=torch.tensor([0, 3, 1])),
            ValueError,
            r"`labels` contains 3, outside the classes 0..2 \(LABEL_0, LABEL_1, LABEL_2\)",
        ),
        (
            lambda: BertForSequenceClassification(ODD)(**batch(), labels=torch.tensor([0, 1])),
            ValueError,
            r"`labels` must have shape \(3,\), one class per sentence",
        ),
        (
            lambda: BertForTokenClassification(ODD)(**batch(), labels=torch.zeros(3, 11, dtype=torch.long)),
            ValueError,
            r"`labels` must have shape \(3, 12\), one label per token",
        ),
        (
            lambda: BertForQuestionAnswering(ODD)(**batch(), start_positions=torch.tensor([1, 2, 3])),
            ValueError,
            r"pass both `start_positions` and `end_positions`",
        ),
        (
            lambda: BertForQuestionAnswering(ODD)(
                **batch(), start_positions=torch.tensor([1, 2]), end_positions=torch.tensor([1, 2])
            ),
            ValueError,
            r"`start_positions` must have shape \(batch,\) = \(3,\)",
        ),
    ],
)
def test_bad_labels_are_explained(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- the same training as Hugging Face, step for step --------------------------------------------


def test_n_optimiser_steps_give_hugging_faces_losses(tmp_path):
    """Same weights, same batches, same AdamW and schedule: the same loss after every step (dropout off)."""
    import dataclasses

    from bertcourse.training import linear_warmup_decay, make_optimizer, train_step

    config = dataclasses.replace(ODD, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    ours = BertForSequenceClassification(config, num_labels=3)
    ours.save_pretrained(tmp_path)
    theirs = transformers.BertForSequenceClassification.from_pretrained(tmp_path, attn_implementation="eager")
    runs = []
    for model in (ours, theirs):
        optimizer = make_optimizer(model, lr=1e-3)
        scheduler = linear_warmup_decay(optimizer, warmup_steps=2, total_steps=6)
        losses = []
        for step in range(6):
            labels = torch.tensor([[0, 2, 1], [1, 1, 0]][step % 2])  # two batches, taken in turn
            losses.append(train_step(model.train(), {**batch(), "labels": labels}, optimizer, scheduler)["loss"])
        runs.append(losses)
    torch.testing.assert_close(torch.tensor(runs[0]), torch.tensor(runs[1]), atol=1e-5, rtol=0)
    assert runs[0][-2:] < runs[0][:2]  # it learned something, so the comparison is not of two frozen models


# --- word labels and word pieces -----------------------------------------------------------------

from bertcourse.finetuning import (  # noqa: E402
    align_word_labels,
    best_span,
    gradient_x_input,
    occlusion,
    word_predictions,
)


def test_alignment_labels_the_first_piece_of_each_word():
    #            [CLS] w0 w1 w1 w1 w2 [SEP] [PAD]
    word_ids = [None, 0, 1, 1, 1, 2, None, None]
    assert align_word_labels(word_ids, [0, 1, 2]).tolist() == [-100, 0, 1, -100, -100, 2, -100, -100]
    assert align_word_labels(word_ids, [0, -100, 2], num_labels=3).tolist()[2] == -100  # a word without a label


def test_alignment_matches_hugging_faces_recipe_on_real_word_ids():
    """The recipe of Hugging Face's token-classification example, on the fast tokenizer's own word ids."""
    hf = transformers.AutoTokenizer.from_pretrained(str(bc.pretrained.default_weights_dir()))
    words = ["Claudius", "poisoned", "the", "unsuspecting", "king", "."]
    labels = [1, 0, 0, 0, 0, 0]
    encoding = hf(words, is_split_into_words=True)
    expected, previous = [], None
    for word in encoding.word_ids():
        expected.append(-100 if word is None or word == previous else labels[word])
        previous = word
    assert align_word_labels(encoding.word_ids(), labels).tolist() == expected
    assert expected.count(-100) > 2  # some words really were split into several pieces


def test_word_predictions_read_the_first_piece():
    word_ids = [None, 0, 1, 1, 2, None]
    assert word_predictions(torch.tensor([9, 5, 6, 7, 8, 9]), word_ids).tolist() == [5, 6, 8]


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: align_word_labels([None, 0, 1, 2, None], [0, 1]),
            ValueError,
            r"has 2 labels, but the pieces come from 3",
        ),
        (
            lambda: align_word_labels([None, 0, None], [5], num_labels=3),
            ValueError,
            r"contains 5, outside the classes 0..2",
        ),
        (lambda: align_word_labels(torch.tensor([0, 1]), [0, 1]), TypeError, r"`word_ids` must be a list"),
        (lambda: align_word_labels([None, 0, None], "B"), TypeError, r"`word_labels` must be a list of int labels"),
        (lambda: align_word_labels([], []), ValueError, r"`word_ids` is empty"),
        (lambda: word_predictions(torch.tensor([1, 2]), [None, 0, None]), ValueError, r"one entry per piece \(3\)"),
    ],
)
def test_bad_word_labels_are_explained(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- answer spans --------------------------------------------------------------------------------


def brute_force_span(start, end, mask, max_len):
    best, where = -float("inf"), (0, 0)
    for i in range(len(start)):
        for j in range(i, min(len(start), i + max_len)):
            if mask[i] and mask[j] and start[i] + end[j] > best:
                best, where = start[i] + end[j], (i, j)
    return list(where)


def test_best_span_is_the_best_valid_span_by_brute_force():
    g = torch.Generator().manual_seed(0)
    start, end = torch.randn(4, 20, generator=g), torch.randn(4, 20, generator=g)
    mask = torch.zeros(4, 20, dtype=torch.bool)
    mask[:, 7:19] = True
    spans = best_span(start, end, mask, max_answer_length=4)
    assert spans.shape == (4, 2) and spans.dtype == torch.long
    for row in range(4):
        assert spans[row].tolist() == brute_force_span(start[row].tolist(), end[row].tolist(), mask[row].tolist(), 4)


def test_best_span_never_ends_before_it_starts_nor_leaves_the_passage():
    start = torch.tensor([0.0, 9.0, 0.0, -9.0, 1.0, 0.0, 0.0])  # the best start is in the question (token 1)
    end = torch.tensor([0.0, 0.0, 0.0, 5.0, 0.0, 2.0, 0.0])  # the best end (3) lies before the passage's best start
    mask = torch.tensor([False, False, False, True, True, True, False])  # the passage: tokens 3..5
    assert best_span(start, end, mask, 30).tolist() == [4, 5]
    assert best_span(start, end, mask, 1).tolist() == [5, 5]  # one token at most
    assert best_span(start, end, torch.zeros(7, dtype=torch.bool), 5).tolist() == [0, 0]  # no passage: [CLS]


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: best_span(torch.zeros(5), torch.zeros(4), torch.ones(5, dtype=torch.bool)),
            ValueError,
            r"`end_logits` must have the shape",
        ),
        (
            lambda: best_span(torch.zeros(5), torch.zeros(5), torch.ones(5)),
            TypeError,
            r"`context_mask` must be a bool tensor",
        ),
        (
            lambda: best_span(torch.zeros(5), torch.zeros(5), torch.ones(5, dtype=torch.bool), 0),
            ValueError,
            r"`max_answer_length` must be a positive int",
        ),
        (
            lambda: best_span(torch.zeros(5, dtype=torch.long), torch.zeros(5), torch.ones(5, dtype=torch.bool)),
            TypeError,
            r"`start_logits` must hold floating-point",
        ),
    ],
)
def test_bad_span_inputs_are_explained(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- what pushes a prediction --------------------------------------------------------------------


def small_classifier():
    config = dataclasses_replace(ODD)
    torch.manual_seed(4)
    return randomised(BertForSequenceClassification(config, num_labels=2, label_names=["rotten", "fresh"]))


def dataclasses_replace(config):
    import dataclasses

    return dataclasses.replace(config)


def test_gradient_x_input_is_the_gradient_of_log_p_times_the_embedding():
    model = small_classifier()
    one = {name: value[:1] for name, value in batch().items()}
    scores = gradient_x_input(model, one, target=1)
    embeddings = model.bert.embeddings.word_embeddings(one["input_ids"]).detach().requires_grad_()

    def log_p(e):
        original = model.bert.embeddings.word_embeddings.forward
        model.bert.embeddings.word_embeddings.forward = lambda ids: e
        try:
            return model(**one).logits.log_softmax(-1)[0, 1]
        finally:
            model.bert.embeddings.word_embeddings.forward = original

    (grad,) = torch.autograd.grad(log_p(embeddings), embeddings)
    torch.testing.assert_close(scores, (grad * embeddings).sum(-1).detach(), atol=1e-6, rtol=1e-5)
    assert not model.training and all(p.grad is None for p in model.parameters())


def test_occlusion_is_the_drop_in_probability_without_each_token():
    model = small_classifier()
    one = {name: value[2:3] for name, value in batch().items()}  # the padded row: 7 real tokens of 12
    scores = occlusion(model, one, target=0)
    ids = one["input_ids"][0, :7]
    with torch.no_grad():
        p = model(ids[None]).logits.softmax(-1)[0, 0]
        for k in range(1, 6):
            without = torch.cat([ids[:k], ids[k + 1 :]])
            assert abs(float(scores[k]) - float(p - model(without[None]).logits.softmax(-1)[0, 0])) < 1e-6
    assert scores[0] == 0 and scores[6] == 0 and bool((scores[7:] == 0).all())  # [CLS], [SEP], padding


def test_saliency_checks_its_target():
    with pytest.raises(ValueError, match=r"`target` must be a class index 0..1 \(rotten, fresh\), got 2"):
        gradient_x_input(small_classifier(), batch(), target=2)
    with pytest.raises(TypeError, match=r"`model` must be a BertForSequenceClassification"):
        occlusion(bc.BertModel(ODD), batch(), target=0)


# --- the learner's model in the ecosystem ----------------------------------------------------------


def test_a_saved_classifier_loads_in_a_transformers_pipeline_and_answers_the_same(tmp_path):
    """save_pretrained (model, label map) + the tokenizer's vocab.txt: transformers.pipeline reads the folder
    and gives our model's label and probability for every text."""
    from bertcourse.finetuning import predict_probabilities

    tok = bc.WordPieceTokenizer.from_folder(bc.pretrained.default_weights_dir())
    config = bc.BertConfig(
        vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    model = randomised(BertForSequenceClassification(config, num_labels=3, label_names=["sad", "flat", "glad"]))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["id2label"] == {"0": "sad", "1": "flat", "2": "glad"}
    classifier = transformers.pipeline("text-classification", model=str(tmp_path), device="cpu")
    texts = ["A joyous, tender film.", "Dull, dull, dull.", "Neither here nor there, and far too long for it."]
    theirs = classifier(texts)
    mine = predict_probabilities(model, tok, texts)  # (3, 3)
    assert [answer["label"] for answer in theirs] == [model.label_names[int(p.argmax())] for p in mine]
    torch.testing.assert_close(torch.tensor([a["score"] for a in theirs]), mine.max(dim=-1).values, atol=1e-5, rtol=0)
