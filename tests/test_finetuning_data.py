"""bertcourse.finetuning (reviews, baselines, tagging, qa): review batches and metrics, the baselines, the
two derived token-level tasks, question windows with a stride (equal to Hugging Face's overflowing windows), and
answer decoding."""

from __future__ import annotations

import pytest
import torch

import bertcourse as bc
from bertcourse import finetuning as ft
from bertcourse.finetuning import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from bertcourse.pooling import mean_pooling
from bertcourse.training import SeededBatches, evaluate, train

REVIEWS = [
    ("A joyous, tender film.", 1),
    ("Dull, dull, dull.", 0),
    ("The best thing about it is the poster.", 0),
    ("Funny and smart and far too short.", 1),
    ("I have never been so bored in a cinema.", 0),
]


@pytest.fixture(scope="module")
def tok():
    return bc.WordPieceTokenizer.from_folder(bc.pretrained.default_weights_dir())


def tiny(tok, **kwargs):
    config = bc.BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        **kwargs,
    )
    torch.manual_seed(0)
    return config


# --- reviews -------------------------------------------------------------------------------------


def test_review_collator_gives_what_the_classifier_takes(tok):
    batch = ft.ReviewCollator(tok, max_length=8)(REVIEWS[:3])
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    assert batch["input_ids"].shape[1] <= 8 and batch["labels"].tolist() == [1, 0, 0]
    model = BertForSequenceClassification(tiny(tok), num_labels=2)
    assert model(**batch).loss.dim() == 0


@pytest.mark.parametrize(
    "examples, error, match",
    [
        ([], ValueError, r"`examples` is an empty batch"),
        ([("fine", 2)], ValueError, r"holds the label 2 for 'fine': labels are class indices 0..1"),
        ([("fine", True)], ValueError, r"holds the label True"),
        (["fine"], TypeError, r"must be a \(text, label\) pair"),
    ],
)
def test_bad_review_batches_are_explained(tok, examples, error, match):
    with pytest.raises(error, match=match):
        ft.ReviewCollator(tok)(examples)


def test_review_batches_cover_every_example_once_shortest_first(tok):
    batches = ft.review_batches(REVIEWS, tok, batch_size=2)
    assert [len(b["labels"]) for b in batches] == [2, 2, 1]
    assert sorted(sum((b["labels"].tolist() for b in batches), [])) == sorted(y for _, y in REVIEWS)
    lengths = [int(b["attention_mask"].sum(1).max()) for b in batches]
    assert lengths[0] <= lengths[-1]


def test_metrics_and_probabilities(tok):
    model = BertForSequenceClassification(tiny(tok), num_labels=2).train()
    figures = evaluate(model, ft.review_batches(REVIEWS, tok, batch_size=2), ft.classification_metrics)
    assert set(figures) == {"loss", "accuracy"} and 0 <= figures["accuracy"] <= 1
    p = ft.predict_probabilities(model, tok, [text for text, _ in REVIEWS], batch_size=2)
    assert p.shape == (5, 2) and model.training  # its mode given back
    torch.testing.assert_close(p.sum(1), torch.ones(5))
    accuracy = (p.argmax(1) == torch.tensor([y for _, y in REVIEWS])).float().mean()
    assert abs(float(accuracy) - figures["accuracy"]) < 1e-6
    with pytest.raises(ValueError, match=r"an empty batch has nothing to predict"):
        ft.predict_probabilities(model, tok, [])


def test_majority_class():
    assert ft.majority_class([1, 0, 1, 1]) == 1
    assert ft.majority_class([1, 0]) == 0  # a tie goes to the smaller label
    with pytest.raises(ValueError, match=r"non-empty list of int labels"):
        ft.majority_class([])


# --- baselines -----------------------------------------------------------------------------------


def test_bag_of_words_is_logistic_regression_on_word_counts():
    assert ft.words_of("Don't go, Bob!") == ["don't", "go", ",", "bob", "!"]
    bow = ft.BagOfWords.from_texts([text for text, _ in REVIEWS] * 2, min_count=2)
    assert "dull" in bow.vocabulary and "zebra" not in bow.vocabulary
    with torch.no_grad():
        bow.weights.weight.normal_()
        bow.weights.weight[0] = 0
    batch = bow.collate([("Dull, dull zebra film.", 0)])
    rows = [bow.index[w] for w in ["dull", ",", "dull", "film", "."]] + [0]  # "zebra" is unknown: row 0
    assert sorted(batch["word_ids"][0].tolist()) == sorted(rows)
    expected = bow.weights.weight[rows].sum(0) + bow.bias
    torch.testing.assert_close(bow(**batch).logits[0], expected)


def test_bag_of_words_learns_with_the_course_loop():
    bow = ft.BagOfWords.from_texts([text for text, _ in REVIEWS], min_count=1)
    history = train(bow, SeededBatches(REVIEWS, 5, bow.collate), steps=30, lr=0.1, weight_decay=0.0, progress=False)
    assert history.train["loss"][-1] < 0.1 < history.train["loss"][0]


def test_sentence_features_are_the_encoders_vectors_in_the_texts_order(tok):
    encoder = bc.BertModel(tiny(tok)).eval()
    texts = [text for text, _ in REVIEWS]
    features = ft.sentence_features(encoder, tok, texts, batch_size=2)
    batch = tok(texts)
    with torch.no_grad():
        out = encoder(**batch)
    torch.testing.assert_close(
        features["mean"], mean_pooling(out.last_hidden_state, batch["attention_mask"]), atol=1e-5, rtol=0
    )
    torch.testing.assert_close(features["cls"], out.last_hidden_state[:, 0], atol=1e-5, rtol=0)
    torch.testing.assert_close(features["pooler"], out.pooler_output, atol=1e-5, rtol=0)


def test_linear_probe_trains_on_fixed_features():
    g = torch.Generator().manual_seed(0)
    features = torch.randn(40, 6, generator=g)
    labels = (features[:, 0] > 0).long().tolist()
    probe = ft.LinearProbe(6)
    examples = ft.LinearProbe.examples(features, labels)
    train(probe, SeededBatches(examples, 10, probe.collate), steps=100, lr=0.05, weight_decay=0.0, progress=False)
    assert evaluate(probe, [probe.collate(examples)], ft.classification_metrics)["accuracy"] > 0.9
    with pytest.raises(ValueError, match=r"one label per row of `features` \(40\), got 3"):
        ft.LinearProbe.examples(features, [0, 1, 0])
    with pytest.raises(ValueError, match=r"`examples` is an empty batch"):
        probe.collate([])


# --- capitalised-name tagging --------------------------------------------------------------------


def test_name_labels_follow_the_capitals_of_the_original_text():
    [(words, labels)] = ft.name_tagging_examples(['Later, young Jack Sparrow meets "Will Turner" in Port Royal.'])
    tags = {w: ft.NAME_LABELS[y] if y >= 0 else None for w, y in zip(words, labels, strict=True)}
    assert words[:6] == ["Later", ",", "young", "Jack", "Sparrow", "meets"]
    assert [tags[w] for w in ("Later", "young", "Jack", "Sparrow", "Will", "Turner", "Port", "Royal")] == [
        None,  # the first word of a sentence: capitalised whatever it is
        "O",
        "B-NAME",
        "I-NAME",
        None,  # after an opening quote
        "B-NAME",  # the run restarts: the word before has no label
        "B-NAME",
        "I-NAME",
    ]


def test_tagging_collator_labels_first_pieces(tok):
    examples = ft.name_tagging_examples(["The ghost of Claudius haunts Elsinore tonight."])
    batch = ft.TaggingCollator(tok)(examples)
    _, word_ids = ft.encode_words(tok, [examples[0][0]])
    assert batch["labels"][0].tolist() == bc.finetuning.align_word_labels(word_ids[0], examples[0][1]).tolist()
    pieces = tok.convert_ids_to_tokens(batch["input_ids"][0])
    named = [p for p, y in zip(pieces, batch["labels"][0].tolist(), strict=True) if y == 1]
    assert named == ["claudius", "elsinore"] or named[0].startswith("cl")  # a name's first piece only
    model = BertForTokenClassification(tiny(tok), num_labels=3, label_names=list(ft.NAME_LABELS))
    assert model(**batch).loss.dim() == 0


def test_the_word_list_rule_tags_the_words_labelled_names_more_often_than_not():
    text = "So Jack Sparrow sails. So the Pearl sails. So a jack lifts. So the jack falls."
    examples = ft.name_tagging_examples([text])
    word_list = ft.name_word_list(examples)
    assert word_list == {"sparrow", "pearl"}  # "jack": a name once, O twice; "So" opens sentences: no label
    assert ft.word_list_labels(["the", "PEARL", "and", "Sparrow", "Pearl", "sails"], word_list) == [0, 1, 0, 1, 2, 0]
    with pytest.raises(TypeError, match=r"each sentence must be a non-empty list of words"):
        ft.word_list_labels("the Pearl", word_list)


@pytest.mark.parametrize(
    "examples, error, match",
    [
        ([(["The", "ghost"], [0])], ValueError, r"a sentence of 2 words has .* as labels: give one label per word"),
        ([(["The", "ghost"], [0, 3])], ValueError, r"contains 3, outside the classes 0..2"),
        ([], ValueError, r"`examples` is an empty batch"),
        ([("The ghost", [0, 0])], TypeError, r"each sentence must be a non-empty list of words"),
    ],
)
def test_bad_tagging_batches_are_explained(tok, examples, error, match):
    with pytest.raises(error, match=match):
        ft.TaggingCollator(tok)(examples)


# --- who-questions, windows and answers ------------------------------------------------------------

SUMMARY = (
    "In a small town, the widow Anna runs a bakery. Her son Tom dreams of the sea. "
    "Anna hides a letter from his father. The letter reaches Tom on his birthday."
)


def test_who_questions_turn_a_sentence_about_a_name_into_a_question():
    [example] = ft.who_questions([SUMMARY])
    assert example.question == "Who hides a letter from his father?"
    assert example.answer == "Anna" and SUMMARY[example.answer_start : example.answer_end] == "Anna"
    assert example.answer_start == SUMMARY.index("Anna hides")  # the subject of that sentence, not the first Anna


def test_question_windows_hold_the_answer_and_equal_hugging_faces_overflowing_windows(tok):
    transformers = pytest.importorskip("transformers")
    [example] = ft.who_questions([SUMMARY])
    windows = ft.question_windows(
        tok,
        example.question,
        SUMMARY,
        max_length=24,
        stride=6,
        answer_start=example.answer_start,
        answer_end=example.answer_end,
    )
    n = len(windows.spans)
    assert n > 2 and windows.batch["input_ids"].shape == (n, 24)
    hf = transformers.AutoTokenizer.from_pretrained(str(bc.pretrained.default_weights_dir()))
    window = 24 - len(tok.tokenize(example.question)) - 1  # the passage's share: max_length - question - 3
    encoded = hf(
        example.question,
        SUMMARY,
        max_length=24,
        truncation="only_second",
        stride=window - 6,  # Hugging Face's stride is the overlap
        return_overflowing_tokens=True,
        padding="max_length",
    )
    assert windows.batch["input_ids"].tolist() == encoded["input_ids"]
    assert windows.batch["token_type_ids"].tolist() == encoded["token_type_ids"]
    holding = (windows.start_positions > 0).nonzero().flatten().tolist()
    assert holding, "some window holds the answer"
    for row in range(n):
        s, e = int(windows.start_positions[row]), int(windows.end_positions[row])
        if row in holding:
            assert tok.decode(windows.batch["input_ids"][row, s : e + 1]) == "anna"
            assert windows.context_mask[row, s] and windows.context_mask[row, e]
        else:
            assert s == e == 0  # [CLS]: this window does not hold the whole answer


def test_decode_answer_takes_the_best_span_over_the_windows(tok):
    [example] = ft.who_questions([SUMMARY])
    windows = ft.question_windows(
        tok,
        example.question,
        SUMMARY,
        max_length=24,
        stride=6,
        answer_start=example.answer_start,
        answer_end=example.answer_end,
    )
    n, seq = windows.context_mask.shape
    start, end = torch.zeros(n, seq), torch.zeros(n, seq)
    row = int((windows.start_positions > 0).nonzero()[-1])
    start[row, windows.start_positions[row]] = end[row, windows.end_positions[row]] = 5.0
    start[:, 1] = end[:, 1] = 50.0  # a question token: never an answer
    text, first, last, score = ft.decode_answer(windows, start, end, SUMMARY)
    assert (text, first, last, score) == ("Anna", example.answer_start, example.answer_end, 10.0)
    model = BertForQuestionAnswering(tiny(tok))
    out = model(**windows.batch, start_positions=windows.start_positions, end_positions=windows.end_positions)
    assert out.loss.dim() == 0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"question": "Who " + "really " * 30 + "did it?"},
            ValueError,
            r"the question has 3\d word pieces; with \[CLS\], \[SEP\] and \[SEP\] that is 3\d of max_length=32, "
            r"which leaves 0 pieces for the passage \(a window needs at least 2\).*at least 3\d\.$",
        ),
        (
            {"question": "Who " + "really " * 24 + "did it?"},
            ValueError,
            r"that is 31 of max_length=32, which leaves 1 piece for the passage",
        ),
        ({"stride": 40}, ValueError, r"must be larger than `stride`=40"),
        ({"answer_start": 3}, ValueError, r"pass both `answer_start` and `answer_end`"),
        ({"answer_start": 3, "answer_end": 999}, ValueError, r"0 <= answer_start < answer_end <= len\(context\)"),
        ({"context": "  "}, ValueError, r"`context` must be a non-empty string"),
    ],
)
def test_bad_question_windows_are_explained(tok, kwargs, error, match):
    arguments = {"question": "Who runs a bakery?", "context": SUMMARY, "max_length": 32, **kwargs}
    with pytest.raises(error, match=match):
        ft.question_windows(tok, **arguments)


def test_training_windows_are_every_window_of_every_question_padded_by_the_collator(tok):
    examples = ft.who_questions([SUMMARY])
    rows = ft.training_windows(tok, examples, max_length=24, stride=6)
    windows = ft.question_windows(
        tok,
        examples[0].question,
        SUMMARY,
        max_length=24,
        stride=6,
        answer_start=examples[0].answer_start,
        answer_end=examples[0].answer_end,
    )
    assert len(rows) == len(windows.spans)
    assert [int(r["start_positions"]) for r in rows] == windows.start_positions.tolist()
    batch = ft.WindowCollator(tok)(rows)
    assert batch["input_ids"].shape == windows.batch["input_ids"].shape
    assert torch.equal(batch["input_ids"], windows.batch["input_ids"])
    assert torch.equal(batch["attention_mask"], windows.batch["attention_mask"])
    with pytest.raises(ValueError, match=r"`rows` is an empty batch"):
        ft.WindowCollator(tok)([])
    with pytest.raises(ValueError, match=r"non-empty list of QAExample"):
        ft.training_windows(tok, [])


def test_the_older_import_paths_still_work():
    from bertcourse import finetuning_data, finetuning_table

    assert finetuning_data.best_span is ft.best_span and finetuning_data.ReviewCollator is ft.ReviewCollator
    assert finetuning_table.load_table is ft.table.load_table and callable(finetuning_table.main)
