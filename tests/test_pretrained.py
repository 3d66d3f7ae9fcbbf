"""Loading Hugging Face checkpoints: key renaming, strictness, prefixes, missing folders; the tokenizer."""

import json

import pytest
import torch
import transformers
from safetensors.torch import save_file

import bertcourse as bc
from bertcourse.pretrained import default_weights_dir
from bertcourse.weights import hf_to_ours

transformers.logging.set_verbosity_error()
SMALL = bc.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=24)


def hf_state(config=SMALL):
    hf = transformers.BertModel(transformers.BertConfig(**vars(config)))
    return {k: v.clone() for k, v in hf.state_dict().items()}


def test_key_renames_are_readable():
    assert hf_to_ours("encoder.layer.3.attention.self.query.weight") == "encoder.layers.3.attention.query.weight"
    assert hf_to_ours("bert.encoder.layer.0.output.LayerNorm.gamma") == "encoder.layers.0.output_norm.weight"
    assert hf_to_ours("embeddings.position_ids") is None
    assert hf_to_ours("cls.predictions.transform.dense.bias", prefixed=True) == "mlm.dense.bias"


def test_keys_with_bert_prefix_load_the_same():
    state = hf_state()
    a, b = bc.BertModel(SMALL), bc.BertModel(SMALL)
    a.load_hf_state_dict(state)
    b.load_hf_state_dict({"bert." + k: v for k, v in state.items()})
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_missing_and_unexpected_weights_are_listed():
    state = hf_state()
    del state["encoder.layer.0.attention.self.key.bias"]
    state["encoder.layer.0.attention.self.rotary.weight"] = torch.zeros(1)
    with pytest.raises(ValueError) as info:
        bc.BertModel(SMALL).load_hf_state_dict(state)
    message = str(info.value)
    assert "missing weights (1): ['encoder.layers.0.attention.key.bias']" in message
    assert "unexpected weights (1): ['encoder.layer.0.attention.self.rotary.weight']" in message  # no rename matched


def test_shape_mismatch_points_at_the_config():
    with pytest.raises(ValueError, match=r"does config.json match the weights"):
        bc.BertModel(SMALL).load_hf_state_dict(hf_state(bc.BertConfig(**{**vars(SMALL), "vocab_size": 60})))


def test_load_pretrained_from_a_hugging_face_folder(tmp_path):
    state = hf_state()
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({**vars(SMALL), "architectures": ["BertModel"]}))
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]))
    model, tok = bc.load_pretrained(tmp_path)
    assert not model.training
    torch.testing.assert_close(model.embeddings.word_embeddings.weight, state["embeddings.word_embeddings.weight"])
    assert tok.convert_ids_to_tokens(tok("hello world")["input_ids"][0]) == ["[CLS]", "hello", "world", "[SEP]"]


def test_missing_folder_and_files_are_explained(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"`path` must be a folder with config.json.*snapshot_download"):
        bc.load_pretrained(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match=r"is a folder without config.json"):
        bc.load_pretrained(tmp_path)
    with pytest.raises(TypeError, match=r"`path` must be a folder path \(str or Path\), got int 5"):
        bc.load_pretrained(5)
    with pytest.raises(ValueError, match=r"`path` is empty"):
        bc.load_pretrained("")
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_text("{")
    with pytest.raises(FileNotFoundError, match=r"has no vocab.txt"):  # found before any weight is read
        bc.load_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("[PAD]")
    with pytest.raises(ValueError, match=r"config.json in .* is not valid JSON"):
        bc.load_pretrained(tmp_path)


def test_tokenizer_matches_hugging_face():
    _, tok = bc.load_pretrained()
    reference = transformers.BertTokenizerFast.from_pretrained(str(default_weights_dir()))
    texts, pairs = ["Hello, world! Tokenization isn't hard.", "short"], ["Second sentence here.", "B"]
    ours = tok(texts, pairs)
    theirs = reference(texts, pairs, padding=True, return_tensors="pt")
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert torch.equal(ours[key], theirs[key]), key
    assert tok("word " * 600)["input_ids"].shape == (1, 512)  # truncated to the position table


def test_tokenizer_state_does_not_leak_between_calls_and_bad_input_is_explained():
    _, tok = bc.load_pretrained()
    assert tok("the quick brown fox", max_length=4)["input_ids"].shape == (1, 4)
    assert tok.tokenize("the quick brown fox") == ["[CLS]", "the", "quick", "brown", "fox", "[SEP]"]
    assert tok("the quick brown fox")["input_ids"].shape == (1, 6)
    cases = [
        (lambda: tok([]), ValueError, "`texts` is an empty list"),
        (lambda: tok("a", pairs=5), TypeError, "`pairs` must be a string or a list of strings, got int 5"),
        (lambda: tok("a", max_length=2), ValueError, r"`max_length` must be an int above 2"),
        (lambda: tok("a", "b", max_length=3), ValueError, r"`max_length` must be an int above 3"),
        (lambda: tok(["a", "b"], ["c"]), ValueError, r"`pairs` must have one entry per text \(2\), got 1"),
        (lambda: tok.convert_ids_to_tokens(tok("a b")["input_ids"]), ValueError, r"pass `ids\[0\]`"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()


def test_encodings_give_word_ids_and_offsets_as_hugging_face_does_and_leave_no_truncation_behind():
    _, tok = bc.load_pretrained()
    reference = transformers.BertTokenizerFast.from_pretrained(str(default_weights_dir()))
    words = [["Tokenization", "isn't", "hard"], ["a", "b"]]
    ours = tok.encodings(words, pretokenized=True, max_length=5)
    theirs = reference(words, is_split_into_words=True, truncation=True, max_length=5)
    assert [e.ids for e in ours] == theirs["input_ids"]
    assert [e.word_ids for e in ours] == [theirs.word_ids(i) for i in range(2)]
    (plain,) = tok.encodings(["the cat sat"], special_tokens=False)
    assert plain.tokens == ["the", "cat", "sat"] and plain.offsets == [(0, 3), (4, 7), (8, 11)]
    assert len(tok.encodings(["word " * 600])[0].ids) == 602  # the truncation above was that call's only
    assert (tok.cls_token_id, tok.sep_token_id) == (reference.cls_token_id, reference.sep_token_id)
    with pytest.raises(ValueError, match=r"`texts` must be a non-empty list of lists of words, got str"):
        tok.encodings("a b", pretokenized=True)
    with pytest.raises(ValueError, match=r"`max_length` must be a positive int or None, got 0"):
        tok.encodings(["a"], max_length=0)


def test_a_cased_checkpoint_is_not_lowercased(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "Hello", "hello"]))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    tok = bc.WordPieceTokenizer.from_folder(tmp_path)
    assert tok.tokenize("Hello") == ["[CLS]", "Hello", "[SEP]"]
