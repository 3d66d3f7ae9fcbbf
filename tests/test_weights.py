"""Loading and saving as the ecosystem does: our models <-> transformers, both ways, on an odd-sized config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import bertcourse as bc
from bertcourse.weights import ENCODER_NAMES, rename

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

# 5 layers, 3 heads of 32, vocabulary 997, 3 token types: no size coincides with another.
ODD = bc.BertConfig(
    vocab_size=997,
    hidden_size=96,
    num_hidden_layers=5,
    num_attention_heads=3,
    intermediate_size=200,
    max_position_embeddings=40,
    type_vocab_size=3,
)


def odd_batch():
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, ODD.vocab_size, (3, 13), generator=g)  # (batch, seq)
    token_type_ids = torch.randint(0, ODD.type_vocab_size, (3, 13), generator=g)
    attention_mask = torch.ones(3, 13, dtype=torch.long)
    attention_mask[1, 9:] = 0  # a padded sentence
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def randomised(model):
    """Every weight random, biases and LayerNorms included, so that no wrong mapping hides behind a 0 or a 1."""
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.1)
    return model.eval()


def test_ours_to_hugging_face_bert_model(tmp_path):
    ours = randomised(bc.BertModel(ODD))
    ours.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    theirs = transformers.BertModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    batch = odd_batch()
    with torch.no_grad():
        a, b = ours(**batch, output_attentions=True), theirs(**batch, output_attentions=True)
    torch.testing.assert_close(a.last_hidden_state, b.last_hidden_state, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.pooler_output, b.pooler_output, atol=1e-5, rtol=0)
    for mine, hf in zip(a.attentions, b.attentions, strict=True):
        torch.testing.assert_close(mine, hf, atol=1e-5, rtol=0)


def test_ours_to_hugging_face_pretraining_model_with_the_tied_decoder_saved_once(tmp_path):
    ours = randomised(bc.BertForPreTraining(ODD))
    ours.save_pretrained(tmp_path)
    saved = load_file(str(tmp_path / "model.safetensors"))
    assert "cls.predictions.decoder.weight" not in saved  # it is the word embeddings
    assert "bert.embeddings.word_embeddings.weight" in saved and "cls.predictions.bias" in saved
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["BertForPreTraining"]
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert theirs.cls.predictions.decoder.weight is theirs.bert.embeddings.word_embeddings.weight
    batch = odd_batch()
    with torch.no_grad():
        a, b = ours(**batch), theirs(**batch)
    torch.testing.assert_close(a.prediction_logits, b.prediction_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.seq_relationship_logits, b.seq_relationship_logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "hf_class, our_class", [("BertModel", bc.BertModel), ("BertForPreTraining", bc.BertForPreTraining)]
)
def test_hugging_face_to_ours_from_a_folder_with_only_config_and_safetensors(tmp_path, hf_class, our_class):
    hf_config = transformers.BertConfig(**vars(ODD), attn_implementation="eager")
    theirs = randomised(getattr(transformers, hf_class)(hf_config))
    theirs.save_pretrained(tmp_path)
    assert not (tmp_path / "vocab.txt").exists()
    ours = our_class.from_pretrained(tmp_path)
    assert not ours.training and ours.newly_initialized == []
    batch = odd_batch()
    with torch.no_grad():
        a, b = ours(**batch), theirs(**batch)
    if hf_class == "BertModel":
        torch.testing.assert_close(a.last_hidden_state, b.last_hidden_state, atol=1e-5, rtol=0)
    else:
        torch.testing.assert_close(a.prediction_logits, b.prediction_logits, atol=1e-5, rtol=0)
        torch.testing.assert_close(a.seq_relationship_logits, b.seq_relationship_logits, atol=1e-5, rtol=0)


def test_a_pretraining_model_on_an_encoder_checkpoint_starts_its_heads_fresh_and_says_so():
    model = bc.BertForPreTraining.from_pretrained(bc.pretrained.default_weights_dir())  # MiniLM: no cls.* weights
    assert set(model.newly_initialized) == {
        "mlm.dense.weight",
        "mlm.dense.bias",
        "mlm.layer_norm.weight",
        "mlm.layer_norm.bias",
        "mlm.bias",
        "nsp.weight",
        "nsp.bias",
    }


def test_losses_equal_hugging_face_pretraining_losses(tmp_path):
    ours = randomised(bc.BertForPreTraining(ODD))
    ours.save_pretrained(tmp_path)
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").eval()
    batch = odd_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 2], labels[1, 4], labels[2, 11] = 5, 996, 0  # three selected positions
    next_sentence_label = torch.tensor([0, 1, 1])
    with torch.no_grad():
        a = ours(**batch, labels=labels, next_sentence_label=next_sentence_label)
        b = theirs(**batch, labels=labels, next_sentence_label=next_sentence_label)
        mlm_only = ours(**batch, labels=labels)
    torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.mlm_loss + a.nsp_loss, a.loss)
    assert mlm_only.nsp_loss is None and torch.equal(mlm_only.loss, mlm_only.mlm_loss)
    assert ours(**batch).loss is None


@pytest.mark.parametrize(
    "labels, next_sentence_label, error, match",
    [
        (
            torch.zeros(3, 12, dtype=torch.long),
            None,
            ValueError,
            r"`labels` must have the shape of `input_ids` \(3, 13\)",
        ),
        (torch.zeros(3, 13), None, TypeError, r"`labels` must hold integers"),
        (torch.full((3, 13), 997), None, ValueError, r"`labels` contains 997: a label is a token id in 0..996 or -100"),
        (None, torch.tensor([0, 1]), ValueError, r"`next_sentence_label` must have shape \(batch,\) = \(3,\)"),
        (None, torch.tensor([0, 2, 1]), ValueError, r"`next_sentence_label` must hold 0 \(B follows A\) or 1"),
    ],
)
def test_bad_labels_are_explained(labels, next_sentence_label, error, match):
    with pytest.raises(error, match=match):
        bc.BertForPreTraining(ODD)(**odd_batch(), labels=labels, next_sentence_label=next_sentence_label)


def test_a_pickle_only_folder_is_refused_with_the_reason_and_the_fix(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(vars(ODD)))
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(ValueError, match=r"pytorch_model.bin but no model.safetensors.*pickle.*save_pretrained"):
        bc.BertModel.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"`folder`='.*' is a folder without model.safetensors"):
        (tmp_path / "pytorch_model.bin").unlink()
        bc.BertModel.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("text", "kind"), [("[]", "array"), ("3", "number"), ('"bert"', "string"), ("null", "null"), ("true", "boolean")]
)
def test_a_config_json_that_is_not_an_object_is_explained(tmp_path, text, kind):
    bc.BertModel(ODD).save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(text)
    expected = rf"config.json in '{tmp_path.name}' holds a JSON {kind} \({re.escape(text)}\), but .* is a JSON object"
    with pytest.raises(ValueError, match=expected):
        bc.BertModel.from_pretrained(tmp_path)


def test_load_pretrained_explains_a_folder_without_a_vocabulary(tmp_path):
    bc.BertModel(ODD).save_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no vocab.txt.*BertModel.from_pretrained\(folder\).*tokenizer.save"):
        bc.load_pretrained(tmp_path)


def test_model_and_tokenizer_saved_together_load_with_load_pretrained_and_in_transformers(tmp_path):
    model, tokenizer = bc.load_pretrained()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    again, tokenizer_again = bc.load_pretrained(tmp_path)
    batch = tokenizer(["The cat sat on the mat.", "Hello"])
    assert torch.equal(tokenizer_again(["The cat sat on the mat.", "Hello"])["input_ids"], batch["input_ids"])
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert hf_tokenizer("The cat sat on the mat.")["input_ids"] == batch["input_ids"][0].tolist()
    with torch.no_grad():
        torch.testing.assert_close(again(**batch).last_hidden_state, model(**batch).last_hidden_state, atol=0, rtol=0)


def test_name_table_maps_both_ways():
    for hf, ours in ENCODER_NAMES:
        hf_key, our_key = hf.replace("{i}", "4") + "weight", ours.replace("{i}", "4") + "weight"
        assert rename(hf_key, ENCODER_NAMES) == our_key
        assert rename(our_key, ENCODER_NAMES, to_ours=False) == hf_key


def test_the_package_never_unpickles_freely_nor_runs_remote_code():
    """Weights move as safetensors; the one torch.load (a training checkpoint's optimizer state) refuses
    anything but tensors and numbers."""
    package = Path(bc.__file__).parent
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "trust_remote_code=True" not in text, path.name
        for call in re.findall(r"torch\.load\([^)]*\)", text):
            assert "weights_only=True" in call, (path.name, call)
