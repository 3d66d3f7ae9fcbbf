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
