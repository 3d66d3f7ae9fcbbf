"""The full BERT against Hugging Face transformers, on random and on real pretrained weights."""

import pytest
import torch
import transformers

import bertcourse as bc
from bertcourse.pretrained import default_weights_dir

transformers.logging.set_verbosity_error()
TOL = {"atol": 1e-5, "rtol": 1e-5}
SMALL = bc.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)


def hf_config(config: bc.BertConfig) -> transformers.BertConfig:
    fields = {k: v for k, v in vars(config).items()}
    return transformers.BertConfig(**fields, hidden_act="gelu", attn_implementation="eager")


def random_batch(config, batch=3, seq=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, config.vocab_size, (batch, seq), generator=g)
    token_type_ids = torch.randint(0, config.type_vocab_size, (batch, seq), generator=g)
    lengths = torch.tensor([seq, seq - 3, 2][:batch])
    attention_mask = bc.padding_mask(lengths, seq).long()
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def assert_same_as_hf(ours, theirs, attention_mask):
    real = attention_mask.bool()
    torch.testing.assert_close(ours.last_hidden_state[real], theirs.last_hidden_state[real], **TOL)
    torch.testing.assert_close(ours.last_hidden_state, theirs.last_hidden_state, **TOL)
    torch.testing.assert_close(ours.pooler_output, theirs.pooler_output, **TOL)
    assert len(ours.attentions) == len(theirs.attentions)
    for mine, hf in zip(ours.attentions, theirs.attentions, strict=True):
        torch.testing.assert_close(mine, hf, **TOL)


def test_random_weights_match_hugging_face():
    torch.manual_seed(0)
    theirs = transformers.BertModel(hf_config(SMALL)).eval()
    ours = bc.BertModel(SMALL).eval()
    ours.load_hf_state_dict(theirs.state_dict())
    batch = random_batch(SMALL)
    with torch.no_grad():
        assert_same_as_hf(
            ours(**batch, output_attentions=True), theirs(**batch, output_attentions=True), batch["attention_mask"]
        )


def test_pretraining_heads_match_hugging_face():
    torch.manual_seed(0)
    theirs = transformers.BertForPreTraining(hf_config(SMALL)).eval()
    with torch.no_grad():
        theirs.cls.predictions.bias.normal_()
    ours = bc.BertForPreTraining(SMALL).eval()
    ours.load_hf_state_dict(theirs.state_dict())
    assert ours.mlm.word_embeddings.weight is ours.bert.embeddings.word_embeddings.weight  # tied
    batch = random_batch(SMALL)
    with torch.no_grad():
        mine, hf = ours(**batch), theirs(**batch)
    torch.testing.assert_close(mine.prediction_logits, hf.prediction_logits, **TOL)
    torch.testing.assert_close(mine.seq_relationship_logits, hf.seq_relationship_logits, **TOL)


@pytest.fixture(scope="module")
def minilm():
    return bc.load_pretrained()


@pytest.fixture(scope="module")
def hf_minilm():
    return transformers.BertModel.from_pretrained(str(default_weights_dir()), attn_implementation="eager").eval()


SENTENCES = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog near the river bank.", "Hi"]


def test_real_minilm_weights_match_hugging_face(minilm, hf_minilm):
    model, tok = minilm
    batch = tok(SENTENCES, ["Where is the cat?", "Foxes are fast.", "Hello there"])
    with torch.no_grad():
        ours = model(**batch, output_attentions=True, output_hidden_states=True)
        theirs = hf_minilm(**batch, output_attentions=True, output_hidden_states=True)
    assert_same_as_hf(ours, theirs, batch["attention_mask"])
    for mine, hf in zip(ours.hidden_states, theirs.hidden_states, strict=True):
        torch.testing.assert_close(mine, hf, **TOL)


def test_fast_path_matches_attention_path_on_real_weights(minilm):
    model, tok = minilm
    batch = tok(SENTENCES)
    with torch.no_grad():
        fast = model(**batch).last_hidden_state
        slow = model(**batch, output_attentions=True).last_hidden_state
    # The two kernels agree to 1e-6 per attention call (test_attention.py); six layers of
    # matmuls and LayerNorms on values up to ~10 accumulate rounding to a few 1e-5.
    torch.testing.assert_close(fast, slow, atol=1e-4, rtol=1e-4)


def test_sentence_embeddings_match_sentence_transformers(minilm):
    from sentence_transformers import SentenceTransformer

    model, tok = minilm
    batch = tok(SENTENCES)
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state  # (batch, seq, 384)
    weights = batch["attention_mask"][..., None].float()  # (batch, seq, 1)
    mean = (hidden * weights).sum(1) / weights.sum(1)  # (batch, 384)
    ours = torch.nn.functional.normalize(mean, dim=-1)
    reference = SentenceTransformer(str(default_weights_dir()), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(ours, reference, **TOL)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_padded_batch_has_no_nan(minilm, dtype):
    model, tok = minilm
    half = bc.BertModel(model.config).eval()
    half.load_state_dict(model.state_dict())
    half = half.to(dtype)
    batch = tok(SENTENCES)
    with torch.no_grad():
        out = half(**batch, output_attentions=True)
    assert out.last_hidden_state.dtype == dtype
    assert torch.isfinite(out.last_hidden_state).all()
    assert all(torch.isfinite(a).all() for a in out.attentions)


def test_bert_base_has_110m_parameters():
    config = bc.BertConfig.bert_base()
    assert bc.count_parameters(config) == 109_482_240
    with torch.device("meta"):
        model = bc.BertModel(config)
    assert sum(p.numel() for p in model.parameters()) == bc.count_parameters(config)
    assert sum(p.numel() for p in bc.BertModel(SMALL).parameters()) == bc.count_parameters(SMALL)


def test_weight_initialisation_is_berts():
    model = bc.BertModel(bc.BertConfig(num_hidden_layers=1))
    std = model.encoder.layers[0].attention.query.weight.std().item()
    assert std == pytest.approx(0.02, rel=0.05)
    assert (model.embeddings.word_embeddings.weight[0] == 0).all()  # [PAD]
    assert (model.encoder.layers[0].feed_forward.output.bias == 0).all()
    assert (model.embeddings.layer_norm.weight == 1).all()


def test_embeddings_function_matches_module():
    model = bc.BertModel(SMALL).eval()
    batch = random_batch(SMALL)
    e = model.embeddings
    expected = e(batch["input_ids"], batch["token_type_ids"])
    got = bc.bert_embeddings(
        batch["input_ids"], batch["token_type_ids"], e.word_embeddings.weight, e.position_embeddings.weight,
        e.token_type_embeddings.weight, e.layer_norm.weight, e.layer_norm.bias, SMALL.layer_norm_eps,
    )  # fmt: skip
    torch.testing.assert_close(got, expected)


def test_position_ids_pick_the_rows_of_the_position_table():
    """Left padding: with position_ids counted from each sentence's first real token, its embeddings are the
    unpadded sentence's, in the function and in the module alike; (seq,) ids serve every sentence."""
    model = bc.BertModel(SMALL).eval()
    e = model.embeddings
    tables = (e.word_embeddings.weight, e.position_embeddings.weight, e.token_type_embeddings.weight)
    ln = (e.layer_norm.weight, e.layer_norm.bias, SMALL.layer_norm_eps)
    ids = torch.tensor([[5, 6, 7]])  # (1, 3)
    padded = torch.tensor([[0, 0, 5, 6, 7]])  # (1, 5): two [PAD] on the left
    types, padded_types = torch.zeros_like(ids), torch.zeros_like(padded)
    position_ids = torch.tensor([[0, 0, 0, 1, 2]])  # (1, 5)
    alone = bc.bert_embeddings(ids, types, *tables, *ln)
    left = bc.bert_embeddings(padded, padded_types, *tables, *ln, position_ids=position_ids)
    torch.testing.assert_close(left[:, 2:], alone)
    torch.testing.assert_close(e(padded, padded_types, position_ids), left)
    flat = bc.bert_embeddings(padded, padded_types, *tables, *ln, position_ids=position_ids[0])
    torch.testing.assert_close(flat, left)


IDS = torch.ones(1, 3, dtype=torch.long)
BAD_INPUTS = [
    (
        {"input_ids": torch.ones(1, 600, dtype=torch.long)},
        ValueError,
        r"`input_ids` has 600 tokens.*max_position_embeddings=512.*Trunc",
    ),
    ({"input_ids": torch.tensor([[5, 200]])}, ValueError, r"`input_ids` contains 200, outside the range 0..98.*=99"),
    ({"input_ids": torch.tensor([[5, -1]])}, ValueError, r"`input_ids` contains -1"),
    ({"input_ids": torch.ones(1, 3)}, TypeError, r"`input_ids` must hold integers \(torch.long\).*torch.float32"),
    (
        {"input_ids": torch.ones(3, dtype=torch.long)},
        ValueError,
        r"`input_ids` must have shape \(batch, seq\).*unsqueeze",
    ),
    ({"input_ids": IDS, "attention_mask": torch.ones(1, 4)}, ValueError, r"`attention_mask` must have the shape of"),
    ({"input_ids": IDS, "attention_mask": torch.full((1, 3), 2)}, ValueError, r"`attention_mask` must be boolean or"),
    ({"input_ids": IDS, "token_type_ids": torch.full((1, 3), 2)}, ValueError, r"`token_type_ids` contains 2.*=2"),
    ({"input_ids": torch.zeros(2, 0, dtype=torch.long)}, ValueError, r"`input_ids` has 0 tokens"),
    ({"input_ids": torch.ones(1, 3, dtype=torch.uint8)}, TypeError, r"`input_ids` must hold integers.*uint8"),
    ({"input_ids": [[101, 102]]}, TypeError, r"`input_ids` must be a torch.Tensor, got list.*torch.tensor"),
]


@pytest.mark.parametrize("kwargs, error, match", BAD_INPUTS)
def test_bad_input_is_explained_before_any_computation(kwargs, error, match):
    model = bc.BertModel(SMALL).eval()
    with pytest.raises(error, match=match):
        model(**kwargs)


def test_config_rejects_heads_that_do_not_divide_width():
    with pytest.raises(ValueError, match=r"`d_model`=512 is not divisible by `num_heads`=12"):
        bc.BertConfig(hidden_size=512)


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"input_ids": torch.ones(1, 40, dtype=torch.long)}, ValueError, r"`input_ids` has 40 tokens.*=32"),
        ({"input_ids": torch.tensor([[1, 99]])}, ValueError, r"`input_ids` contains 99.*vocab_size=99"),
        ({"input_ids": torch.ones(1, 3)}, TypeError, r"`input_ids` must hold integers"),
        ({"input_ids": torch.ones(3, dtype=torch.long)}, ValueError, r"\(batch, seq\).*unsqueeze"),
        ({"position_embeddings": torch.zeros(4, 32).T}, ValueError, r"`position_embeddings` must have shape"),
        ({"position_ids": torch.arange(3.0)}, TypeError, r"`position_ids` must hold integers"),
        ({"position_ids": torch.arange(4)}, ValueError, r"`position_ids` must have shape \(batch, seq\) = \(1, 3\)"),
        ({"position_ids": torch.tensor([0, 1, 32])}, ValueError, r"`position_ids` contains 32.*=32"),
    ],
)
def test_the_embeddings_function_checks_its_input_like_the_model(change, error, match):
    config = bc.BertConfig(**{**vars(SMALL), "max_position_embeddings": 32})
    e = bc.BertEmbeddings(config)
    args = {
        "input_ids": torch.ones(1, 3, dtype=torch.long),
        "token_type_ids": None,
        "word_embeddings": e.word_embeddings.weight,
        "position_embeddings": e.position_embeddings.weight,
        "token_type_embeddings": e.token_type_embeddings.weight,
        "ln_weight": e.layer_norm.weight,
        "ln_bias": e.layer_norm.bias,
    }
    assert bc.bert_embeddings(**args).shape == (1, 3, 32)
    with pytest.raises(error, match=match):
        bc.bert_embeddings(**{**args, **change})


def test_a_config_of_the_wrong_kind_is_explained():
    with pytest.raises(TypeError, match=r"`config` must be a BertConfig, got dict.*from_dict"):
        bc.BertModel({"hidden_size": 32})
    with pytest.raises(TypeError, match=r"`values` must be a dict of BertConfig's fields .*, got list \[\]"):
        bc.BertConfig.from_dict([])
    with pytest.raises(TypeError, match=r"`config` must be a BertConfig, got BertModel"):
        bc.count_parameters(bc.BertModel(SMALL))
    with pytest.raises(ValueError, match=r"`hidden_dropout_prob` must be a probability"):
        bc.BertConfig(hidden_dropout_prob=1.5)
    with pytest.raises(ValueError, match=r"`pad_token_id`=200 must be an id below vocab_size=99"):
        bc.BertConfig(**{**vars(SMALL), "pad_token_id": 200})


def test_learned_positions_are_the_embeddings_position_table():
    model = bc.BertModel(SMALL)
    table = model.embeddings.position_embeddings
    assert isinstance(table, bc.LearnedPositionEmbedding)
    torch.testing.assert_close(table(4), table.weight[:4])
