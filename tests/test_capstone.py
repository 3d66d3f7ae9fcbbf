"""The capstone's package: the reference pieces assembled match Hugging Face within 1e-5; a known-wrong piece
is named at its step with its check's diagnosis; start() never overwrites; bad input gets clear errors."""

import pytest
import torch
import transformers

import bertcourse as bc
from bertcourse.capstone import compare, load_pieces, skeleton, start
from bertcourse.encoder import pre_ln_layer
from bertcourse.pretrained import default_weights_dir


@pytest.fixture(scope="module")
def setting():
    _, tokenizer = bc.load_pretrained()
    batch = tokenizer(["The cat sat on the mat.", "A dog."])
    hf = transformers.BertModel.from_pretrained(default_weights_dir(), attn_implementation="eager").eval()
    return hf, batch


def test_reference_pieces_match_hugging_face_within_1e_5(setting):
    report = compare(load_pieces(), *setting)
    assert report.matches and report.difference < 1e-5, report.text


def _sdpa_by_d_k(q, k, v, mask=None, *, need_weights=True, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(q.dtype).min)
    weights = scores.softmax(-1)
    return weights @ v, weights


def _split_without_transpose(x, num_heads):
    batch, seq, d_model = x.shape
    return x.reshape(batch, num_heads, seq, d_model // num_heads)


def _layer_norm_unbiased(x, weight, bias, eps=1e-12):
    return weight * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) + bias


def _ffn_relu(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2


def _post_ln_as_pre_ln(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    return pre_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps)


def _embeddings_without_positions(ids, types, words, positions, segments, ln_weight, ln_bias, eps=1e-12):
    return torch.nn.functional.layer_norm(words[ids] + segments[types], words.shape[-1:], ln_weight, ln_bias, eps)


WRONG = [
    ("scaled_dot_product_attention", _sdpa_by_d_k, "layer 0: attention", "scaling by d_k"),
    ("split_heads", _split_without_transpose, "layer 0: heads split (q)", "a plain view"),
    ("layer_norm", _layer_norm_unbiased, "layer 0: LayerNorm", "the unbiased variance"),
    ("feed_forward", _ffn_relu, "layer 0: feed-forward", "ReLU instead of GELU"),
    ("post_ln_layer", _post_ln_as_pre_ln, "layer 0: what post_ln_layer gives the attention", "the Pre-LN layout"),
    ("bert_embeddings", _embeddings_without_positions, "embeddings", "no position embeddings"),
]


@pytest.mark.parametrize(("piece", "wrong", "step", "mistake"), WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_piece_is_named_at_its_step(setting, piece, wrong, step, mistake):
    report = compare(load_pieces({piece: wrong}), *setting)
    assert (report.step, report.piece) == (step, piece), report.text
    assert mistake in report.text, report.text


def test_start_writes_the_skeleton_once_and_never_overwrites(tmp_path):
    first = start(tmp_path)
    assert first.created and first.path.read_text() == skeleton()
    first.path.write_text("# mine\n")
    second = start(tmp_path)
    assert not second.created and first.path.read_text() == "# mine\n"
    assert repr(first) == repr(second)  # the notebook's output is the same either way
    assert [p.name for p in tmp_path.iterdir()] == ["my_bert.py"]


def test_the_skeleton_is_the_reference_everywhere(tmp_path):
    pieces = load_pieces(start(tmp_path).path)
    assert not pieces.mine


def test_bad_input_gets_clear_errors(tmp_path):
    with pytest.raises(TypeError, match="`folder` must be a folder path"):
        start(3)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        start(tmp_path / "missing")
    with pytest.raises(ValueError, match="unknown pieces"):
        load_pieces({"attention": print})
    with pytest.raises(TypeError, match="must be a function"):
        load_pieces({"layer_norm": 3})
    with pytest.raises(FileNotFoundError, match="start\\(\\)"):
        load_pieces(tmp_path / "my_bert.py")
