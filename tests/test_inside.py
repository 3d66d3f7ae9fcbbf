"""bertcourse.inside: the neuron view against the model's and Hugging Face's own maps, role targets
and scores by hand, rollout by hand, perturbation, ablation against a W_O with zeroed columns (ours and
Hugging Face's), and a clear error for each bad argument."""

import copy
import math

import pytest
import torch
import transformers

import bertcourse as bc
from bertcourse import inside
from bertcourse.pooling import sentence_embeddings
from bertcourse.pretrained import default_weights_dir

transformers.logging.set_verbosity_error()
TOL = {"atol": 1e-5, "rtol": 1e-5}
TEXT = "The dog chased the ball across the garden."
PAIRS = [
    ("A man is playing a guitar.", "Someone is strumming a guitar on stage."),
    ("The dog bit the man.", "The man bit the dog."),
]


@pytest.fixture(scope="module")
def minilm():
    return bc.load_pretrained()


@pytest.fixture(scope="module")
def hugging_face():
    return transformers.BertModel.from_pretrained(str(default_weights_dir()), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def tiny(minilm):
    """A small random BERT (2 layers, 4 heads of 8) that reads the real tokenizer's ids."""
    torch.manual_seed(0)
    config = bc.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
    return bc.BertModel(config).eval(), minilm[1]


def model_maps(model, tok, text):
    with torch.no_grad():
        return torch.stack(model(**tok(text), output_attentions=True).attentions)[:, 0]  # (layers, heads, seq, seq)


# --- sentence_tokens ----------------------------------------------------------------------------------


def test_sentence_tokens_are_the_tokenizers(minilm):
    model, tok = minilm
    assert inside.sentence_tokens(model, tok, TEXT) == tok.convert_ids_to_tokens(tok(TEXT)["input_ids"][0])


@pytest.mark.parametrize(
    ("text", "error", "words"),
    [
        ("", ValueError, "`text` is empty: type a sentence."),
        ("   ", ValueError, "`text` is empty"),
        ("word " * 600, ValueError, "`text` has 602 tokens with [CLS] and [SEP], but the model has learned positions"),
        (["a list"], TypeError, "`text` must be a string"),
    ],
)
def test_sentence_tokens_refuse_what_the_model_cannot_read(minilm, text, error, words):
    with pytest.raises(error) as info:
        inside.sentence_tokens(*minilm, text)
    assert words in str(info.value)


def test_models_are_checked(minilm):
    model, tok = minilm
    with pytest.raises(TypeError, match="`model` must be a bertcourse BertModel"):
        inside.sentence_tokens(torch.nn.Linear(2, 2), tok, TEXT)
    training = copy.deepcopy(model).train()
    with pytest.raises(ValueError, match=r"training mode.*model.eval\(\)"):
        inside.neuron_view(training, tok, TEXT, 0, 0)


def test_a_model_holding_a_bert_is_accepted(tiny):
    model, tok = tiny
    holder = torch.nn.Module()
    holder.bert = model
    view = inside.neuron_view(holder, tok, TEXT, 1, 2)
    torch.testing.assert_close(view.weights, model_maps(model, tok, TEXT)[1, 2], **TOL)


# --- neuron view ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("layer", "head"), [(0, 0), (0, 2), (3, 7), (5, 11)])
def test_neuron_view_softmax_is_the_models_attention(minilm, layer, head):
    model, tok = minilm
    view = inside.neuron_view(model, tok, TEXT, layer, head)
    seq = len(view.tokens)
    assert (view.q.shape, view.k.shape, view.scores.shape) == ((seq, 32), (seq, 32), (seq, seq))
    torch.testing.assert_close(view.weights, model_maps(model, tok, TEXT)[layer, head], **TOL)
    torch.testing.assert_close(view.weights, view.scores.softmax(dim=-1))


def test_neuron_view_q_and_k_are_hugging_faces(minilm, hugging_face):
    model, tok = minilm
    hf = hugging_face
    batch = tok(TEXT)
    with torch.no_grad():
        hidden = hf(**batch, output_hidden_states=True).hidden_states
        for layer, head in [(0, 2), (4, 5)]:
            attention = hf.encoder.layer[layer].attention.self
            q = attention.query(hidden[layer])[0].view(-1, 12, 32)[:, head]  # (seq, d_k)
            k = attention.key(hidden[layer])[0].view(-1, 12, 32)[:, head]
            view = inside.neuron_view(model, tok, TEXT, layer, head)
            torch.testing.assert_close(view.q, q, **TOL)
            torch.testing.assert_close(view.k, k, **TOL)


def test_product_sums_to_the_score(minilm):
    view = inside.neuron_view(*minilm, TEXT, 0, 2)
    product = view.product(3, 2)
    assert product.shape == (view.d_k,)
    torch.testing.assert_close(product.sum() / math.sqrt(view.d_k), view.scores[3, 2], **TOL)
    with pytest.raises(ValueError, match=r"`key` must be from 0 to 10 \(the model has 11 tokens\), got 11"):
        view.product(0, 11)


@pytest.mark.parametrize(
    ("layer", "head", "error", "words"),
    [
        (6, 0, ValueError, "`layer` must be from 0 to 5 (the model has 6 layers), got 6."),
        (0, 12, ValueError, "`head` must be from 0 to 11 (the model has 12 heads), got 12."),
        (-1, 0, ValueError, "`layer` must be from 0 to 5"),
        (0, 1.0, TypeError, "`head` must be an int"),
    ],
)
def test_neuron_view_refuses_a_head_the_model_does_not_have(minilm, layer, head, error, words):
    with pytest.raises(error) as info:
        inside.neuron_view(*minilm, TEXT, layer, head)
    assert words in str(info.value)


# --- head roles -----------------------------------------------------------------------------------------

TOKENS = ["[CLS]", "the", "cat", ",", "the", "dog", "##s", "and", "the", "cat", ".", "[SEP]"]


def positions(targets):
    return [row.nonzero().flatten().tolist() for row in targets]


def test_role_targets_by_hand():
    targets = inside.role_targets(TOKENS)
    assert list(targets) == list(inside.ROLES)
    assert all(t.shape == (12, 12) and t.dtype == torch.bool for t in targets.values())
    assert positions(targets["previous token"]) == [[]] + [[i - 1] for i in range(1, 12)]
    assert positions(targets["next token"]) == [[i + 1] for i in range(11)] + [[]]
    assert positions(targets["[CLS]"]) == [[0]] * 12
    assert positions(targets["[SEP]"]) == [[11]] * 12
    assert positions(targets["punctuation"]) == [[3, 10]] * 12
    same = positions(targets["same word elsewhere"])
    assert same[1] == [4, 8] and same[4] == [1, 8] and same[2] == [9] and same[9] == [2]
    assert same[5] == same[6] == same[3] == same[0] == []  # a lone word, a ## piece, punctuation, [CLS]


def test_role_score_by_hand():
    attention = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.75, 0.25]])  # (3, 3)
    previous = inside.role_targets(["[CLS]", "a", "[SEP]"])["previous token"]
    assert float(inside.role_score(attention, previous)) == pytest.approx((0.5 + 0.75) / 2)  # query 0 takes no part
    everything = torch.ones(3, 3, dtype=torch.bool)
    assert float(inside.role_score(attention, everything)) == pytest.approx(1.0)
    stacked = torch.stack([attention, attention.flip(-1)])  # (2, 3, 3)
    assert inside.role_score(stacked, previous).shape == (2,)
    assert math.isnan(float(inside.role_score(attention, torch.zeros(3, 3, dtype=torch.bool))))


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: inside.role_score(torch.ones(3, 4), torch.ones(3, 4)), ValueError, "square (seq, seq)"),
        (lambda: inside.role_score(torch.ones(3, 3), torch.ones(2, 2)), ValueError, "(seq, seq) = (3, 3)"),
        (lambda: inside.role_score(torch.ones(3, 3), torch.full((3, 3), 2)), ValueError, "only 0/1"),
        (lambda: inside.role_score(torch.ones(3, 3, dtype=torch.long), torch.ones(3, 3)), TypeError, "floating"),
        (lambda: inside.role_targets("[CLS] a [SEP]"), TypeError, "list of token strings"),
        (lambda: inside.role_targets([]), ValueError, "`tokens` is empty"),
    ],
)
def test_role_errors(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


SENTENCES = ["The cat sat on the mat, and the dog sat on the rug.", "Why?", "He bought apples, pears, and plums."]


def test_head_role_scores_pool_each_sentence_alone(minilm):
    model, tok = minilm
    roles = inside.head_role_scores(model, tok, SENTENCES)  # one padded batch
    for role in inside.ROLES:
        mass, count = torch.zeros(6, 12), 0
        for sentence in SENTENCES:
            tokens = inside.sentence_tokens(model, tok, sentence)
            targets = inside.role_targets(tokens)[role]
            score = inside.role_score(model_maps(model, tok, sentence), targets)  # (layers, heads)
            queries = int(targets.any(dim=-1).sum())
            if queries:
                mass, count = mass + score * queries, count + queries
        assert roles.queries[role] == count
        torch.testing.assert_close(roles.scores[role], mass / count, **TOL)
        assert 0.0 < roles.uniform[role] < 1.0


def test_the_previous_token_head_of_minilm(minilm):
    roles = inside.head_role_scores(*minilm, SENTENCES)
    layer, head, score = roles.best("previous token")
    assert (layer, head) == (0, 2) and score > 0.99
    with pytest.raises(ValueError, match="`role` must be one of"):
        roles.best("verbs")


def test_uniform_baseline_by_hand(minilm):
    roles = inside.head_role_scores(*minilm, ["Why?"])  # [CLS] why ? [SEP]: 4 tokens
    assert roles.uniform["[CLS]"] == pytest.approx(1 / 4)
    assert roles.uniform["previous token"] == pytest.approx(1 / 4)
    assert roles.queries["same word elsewhere"] == 0
    assert torch.equal(roles.scores["same word elsewhere"], torch.zeros(6, 12))


def test_head_role_scores_check_the_sentences(minilm):
    with pytest.raises(TypeError, match="non-empty list of strings"):
        inside.head_role_scores(*minilm, "one sentence")
    with pytest.raises(ValueError, match="`text` is empty"):
        inside.head_role_scores(*minilm, ["fine", ""])


# --- rollout, pooled attention, perturbation ------------------------------------------------------------


def random_maps(layers=3, batch=2, heads=4, seq=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(batch, heads, seq, seq, generator=g).softmax(dim=-1) for _ in range(layers))


def test_rollout_by_hand():
    maps = random_maps()
    expected = torch.eye(5).expand(2, 5, 5)
    for layer_maps in maps:
        mixing = 0.5 * layer_maps.mean(dim=1) + 0.5 * torch.eye(5)
        expected = mixing @ expected
    rollout = inside.attention_rollout(maps)
    torch.testing.assert_close(rollout, expected)
    torch.testing.assert_close(rollout.sum(dim=-1), torch.ones(2, 5))
    torch.testing.assert_close(inside.attention_rollout(torch.stack(maps)), rollout)
    plain = maps[2].mean(1) @ maps[1].mean(1) @ maps[0].mean(1)
    torch.testing.assert_close(inside.attention_rollout(maps, residual=False), plain)


def test_rollout_of_one_layer_is_half_attention_half_identity():
    (layer_maps,) = random_maps(layers=1)
    expected = 0.5 * layer_maps.mean(dim=1) + 0.5 * torch.eye(5)
    torch.testing.assert_close(inside.attention_rollout([layer_maps]), expected)


@pytest.mark.parametrize(
    ("attentions", "error", "words"),
    [
        ((), TypeError, "non-empty tuple"),
        ("maps", TypeError, "non-empty tuple"),
        (torch.ones(5, 5), ValueError, "at least 4 dimensions"),
        ((torch.ones(2, 3, 3), torch.ones(2, 4, 4)), ValueError, "`attentions[1]` must have the shape"),
        ((torch.ones(2, 3, 4),), ValueError, "square (seq, seq)"),
        ((torch.ones(2, 3, 3, dtype=torch.long),), TypeError, "floating"),
    ],
)
def test_rollout_errors(attentions, error, words):
    with pytest.raises(error) as info:
        inside.attention_rollout(attentions)
    assert words in str(info.value)


def test_pooled_attention_is_the_mean_of_the_real_rows():
    attention = random_maps(layers=1, batch=2, heads=1, seq=4)[0][:, 0]  # (2, 4, 4)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    pooled = inside.pooled_attention(attention, mask)
    torch.testing.assert_close(pooled[0], attention[0].mean(dim=0))
    torch.testing.assert_close(pooled[1], attention[1, :2].mean(dim=0))
    torch.testing.assert_close(inside.pooled_attention(attention), attention.mean(dim=1))
    with pytest.raises(ValueError, match=r"\(batch, seq\) = \(2, 4\)"):
        inside.pooled_attention(attention, mask[:, :3])
    with pytest.raises(ValueError, match="square maps"):
        inside.pooled_attention(torch.ones(2, 3, 4))


def test_token_removal_effect_equals_masking_each_token(minilm):
    model, tok = minilm
    tokens, effects = inside.token_removal_effect(model, tok, TEXT)
    assert effects.shape == (len(tokens),)
    batch = tok(TEXT)
    with torch.no_grad():
        full = sentence_embeddings(model, batch)[0]
    for position in (0, 2, len(tokens) - 1):
        mask = batch["attention_mask"].clone()
        mask[0, position] = 0
        with torch.no_grad():
            removed = sentence_embeddings(model, {**batch, "attention_mask": mask})[0]
        assert float(effects[position]) == pytest.approx(1.0 - float(full @ removed), abs=1e-5)
    assert bool((effects >= -1e-6).all()) and bool((effects <= 2.0).all())


def test_rank_correlation_is_spearmans():
    stats = pytest.importorskip("scipy.stats")
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(12, generator=g), torch.randn(12, generator=g)
    assert inside.rank_correlation(a, b) == pytest.approx(stats.spearmanr(a.numpy(), b.numpy()).statistic)
    assert inside.rank_correlation(a, 2 * a + 1) == pytest.approx(1.0)
    assert inside.rank_correlation(a, -a) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="same length, at least 2"):
        inside.rank_correlation(a, b[:3])


# --- head ablation --------------------------------------------------------------------------------------


def zeroed_w_o_copy(model, heads):
    """The textbook version: a copy of the model whose W_O ignores the heads' slices of its input."""
    ablated = copy.deepcopy(model)
    d_k = model.config.hidden_size // model.config.num_attention_heads
    with torch.no_grad():
        for layer, head in heads:
            ablated.encoder.layers[layer].attention.output.weight[:, head * d_k : (head + 1) * d_k] = 0.0
    return ablated


@pytest.mark.parametrize("heads", [[(0, 1)], [(1, 0), (1, 3), (0, 2)], [(1, h) for h in range(4)]])
def test_heads_ablated_equals_zeroing_w_o_columns_and_leaves_the_model_alone(tiny, heads):
    model, tok = tiny
    batch = tok(["The dog chased the ball.", "Why?"])
    with torch.no_grad():
        before = model(**batch).last_hidden_state
        with inside.heads_ablated(model, heads) as same_model:
            assert same_model is model
            ablated = model(**batch).last_hidden_state
        expected = zeroed_w_o_copy(model, heads)(**batch).last_hidden_state
        after = model(**batch).last_hidden_state
    torch.testing.assert_close(ablated, expected, **TOL)
    assert (ablated - before).abs().max() > 1e-4
    assert torch.equal(after, before)


def test_heads_ablated_matches_hugging_face_with_zeroed_columns(minilm, hugging_face):
    model, tok = minilm
    hf = copy.deepcopy(hugging_face)
    with torch.no_grad():
        hf.encoder.layer[3].attention.output.dense.weight[:, 3 * 32 : 4 * 32] = 0.0
    batch = tok(PAIRS[0])
    with torch.no_grad(), inside.heads_ablated(model, [(3, 3)]):
        ours = model(**batch).last_hidden_state
    with torch.no_grad():
        theirs = hf(**batch).last_hidden_state
    torch.testing.assert_close(ours, theirs, **TOL)


def test_heads_ablated_removes_its_hooks_after_an_error(tiny):
    model, _ = tiny
    with pytest.raises(RuntimeError, match="inside the block"), inside.heads_ablated(model, [(0, 0)]):
        raise RuntimeError("inside the block")
    assert not model.encoder.layers[0].attention.output._forward_pre_hooks


@pytest.mark.parametrize(
    ("heads", "error", "words"),
    [
        ([(2, 0)], ValueError, "`layer` must be from 0 to 1 (the model has 2 layers), got 2."),
        ([(0, 4)], ValueError, "`head` must be from 0 to 3 (the model has 4 heads), got 4."),
        ((0, 1), TypeError, "`heads` must hold (layer, head) pairs"),
        ("0,1", TypeError, "`heads` must be a list of (layer, head) pairs"),
    ],
)
def test_heads_ablated_checks_the_heads(tiny, heads, error, words):
    with pytest.raises(error) as info, inside.heads_ablated(tiny[0], heads):
        pass
    assert words in str(info.value)


def test_ablation_effects_by_hand(tiny):
    model, tok = tiny
    effects = inside.ablation_effects(model, tok, PAIRS)
    assert (effects.per_head.shape, effects.per_layer.shape, effects.similarity.shape) == ((2, 4), (2,), (2,))

    def cosines(m):
        with torch.no_grad():
            e = sentence_embeddings(m, tok([s for pair in PAIRS for s in pair]))
        return (e[0::2] * e[1::2]).sum(dim=-1)

    baseline = cosines(model)
    torch.testing.assert_close(effects.similarity, baseline, **TOL)
    for layer, head in [(0, 3), (1, 1)]:
        change = (cosines(zeroed_w_o_copy(model, [(layer, head)])) - baseline).abs().mean()
        assert float(effects.per_head[layer, head]) == pytest.approx(float(change), abs=1e-5)
    whole_layer = (cosines(zeroed_w_o_copy(model, [(1, h) for h in range(4)])) - baseline).abs().mean()
    assert float(effects.per_layer[1]) == pytest.approx(float(whole_layer), abs=1e-5)


def test_ablation_effects_check_the_pairs(tiny):
    with pytest.raises(TypeError, match=r"non-empty list of \(sentence, sentence\) pairs"):
        inside.ablation_effects(*tiny, ["one", "two"])
    with pytest.raises(ValueError, match="`text` is empty"):
        inside.ablation_effects(*tiny, [("fine", "")])


def test_ablation_effects_keep_each_pairs_signed_change(tiny):
    model, tok = tiny
    effects = inside.ablation_effects(model, tok, PAIRS)
    assert (effects.changes.shape, effects.layer_changes.shape) == ((2, 4, 2), (2, 2))
    torch.testing.assert_close(effects.per_head, effects.changes.abs().mean(dim=-1))
    torch.testing.assert_close(effects.per_layer, effects.layer_changes.abs().mean(dim=-1))
    with torch.no_grad():
        e = sentence_embeddings(zeroed_w_o_copy(model, [(0, 3)]), tok([s for pair in PAIRS for s in pair]))
    torch.testing.assert_close(effects.changes[0, 3], (e[0::2] * e[1::2]).sum(dim=-1) - effects.similarity, **TOL)


def mean_ablated_copy(model, heads, batch):
    """The textbook version of mean-ablation: W_O's columns of the head zeroed, its mean output moved into the bias."""
    d_k = model.config.hidden_size // model.config.num_attention_heads
    captured = {}
    hooks = [
        layer.attention.output.register_forward_pre_hook(lambda m, i, n=n: captured.__setitem__(n, i[0]))
        for n, layer in enumerate(model.encoder.layers)
    ]
    with torch.no_grad():
        model(**batch)
    for hook in hooks:
        hook.remove()
    real = batch["attention_mask"].bool()
    ablated = copy.deepcopy(model)
    with torch.no_grad():
        for layer, head in heads:
            columns = slice(head * d_k, (head + 1) * d_k)
            mean = captured[layer][real][:, columns].mean(dim=0)  # (d_k,)
            output = ablated.encoder.layers[layer].attention.output
            output.bias += output.weight[:, columns] @ mean
            output.weight[:, columns] = 0.0
    return ablated


@pytest.mark.parametrize("heads", [[(0, 1)], [(1, 0), (0, 2)]])
def test_mean_ablation_equals_the_mean_moved_into_the_bias(tiny, heads):
    model, tok = tiny
    batch = tok(["The dog chased the ball.", "Why?", "A much longer sentence than the others here."])
    with torch.no_grad(), inside.heads_ablated(model, heads, mean_of=batch):
        ablated = model(**batch).last_hidden_state
    with torch.no_grad():
        expected = mean_ablated_copy(model, heads, batch)(**batch).last_hidden_state
        zeroed = inside.heads_ablated(model, heads)
        with zeroed:
            zero = model(**batch).last_hidden_state
    torch.testing.assert_close(ablated, expected, **TOL)
    assert (ablated - zero).abs().max() > 1e-4  # not the same as zeroing


def test_ablation_effects_with_mean_ablation(tiny):
    model, tok = tiny
    effects = inside.ablation_effects(model, tok, PAIRS, mean=True)
    batch = tok([s for pair in PAIRS for s in pair])
    with torch.no_grad():
        e = sentence_embeddings(mean_ablated_copy(model, [(1, 2)], batch), batch)
    torch.testing.assert_close(effects.changes[1, 2], (e[0::2] * e[1::2]).sum(dim=-1) - effects.similarity, **TOL)


# --- the head's own directions --------------------------------------------------------------------------


def test_head_directions_give_the_same_scores_in_order_of_strength(minilm):
    model, tok = minilm
    for layer, head in [(0, 2), (4, 5)]:
        view = inside.neuron_view(model, tok, TEXT, layer, head)
        to_q, to_k, strengths = inside.head_directions(model, layer, head)
        assert to_q.shape == to_k.shape == (32, 32) and strengths.shape == (32,)
        assert (strengths[:-1] >= strengths[1:]).all()
        torch.testing.assert_close(view.q @ to_q, view.q_directions)
        scores = view.q_directions @ view.k_directions.T / math.sqrt(32)
        torch.testing.assert_close(scores, view.scores, atol=1e-3, rtol=1e-4)
        product = view.product(3, 2, basis="directions")
        assert float(product.sum() / math.sqrt(32)) == pytest.approx(float(view.scores[3, 2]), abs=1e-3)


def test_head_directions_do_not_depend_on_a_rotation_of_the_head(tiny):
    model, tok = tiny
    rotated = copy.deepcopy(model)
    rotation, _ = torch.linalg.qr(torch.randn(8, 8, generator=torch.Generator().manual_seed(1)))
    with torch.no_grad():
        attention = rotated.encoder.layers[1].attention
        for projection in (attention.query, attention.key):
            rows = slice(8, 16)  # head 1
            projection.weight[rows] = rotation.T @ projection.weight[rows]  # q -> q R
            projection.bias[rows] = rotation.T @ projection.bias[rows]
    before = inside.neuron_view(model, tok, TEXT, 1, 1)
    after = inside.neuron_view(rotated, tok, TEXT, 1, 1)
    torch.testing.assert_close(after.scores, before.scores, atol=1e-4, rtol=1e-4)
    assert (after.q - before.q).abs().max() > 1e-2  # every coordinate moved
    torch.testing.assert_close(inside.head_directions(rotated, 1, 1)[2], inside.head_directions(model, 1, 1)[2], **TOL)
    torch.testing.assert_close(after.q_directions.abs(), before.q_directions.abs(), atol=1e-4, rtol=1e-4)


def test_head_directions_depend_on_how_the_bias_is_folded_in(minilm):
    model, tok = minilm
    view = inside.neuron_view(model, tok, TEXT, 0, 2)
    one, ten = inside.head_directions(model, 0, 2), inside.head_directions(model, 0, 2, bias_scale=10.0)
    for to_q, to_k, _ in (one, ten):  # every c gives the same scores
        scores = (view.q @ to_q) @ (view.k @ to_k).T / math.sqrt(32)
        torch.testing.assert_close(scores, view.scores, atol=1e-3, rtol=1e-4)
    assert (one[2] - ten[2]).abs().max() > 1e-2  # but another M, with other singular values and directions
    for bad in (0.0, -1.0, "10", True):
        with pytest.raises(ValueError, match="bias_scale"):
            inside.head_directions(model, 0, 2, bias_scale=bad)


def test_product_refuses_an_unknown_basis(minilm):
    view = inside.neuron_view(*minilm, TEXT, 0, 2)
    with pytest.raises(ValueError, match="`basis` must be 'dimensions' or 'directions', got 'axes'"):
        view.product(1, 0, basis="axes")


# --- removing several tokens, as keys or from the mean -----------------------------------------------------


def test_removal_effect_of_one_token_is_token_removal_effect(minilm):
    model, tok = minilm
    _, effects = inside.token_removal_effect(model, tok, TEXT)
    for position in (0, 3, 10):
        assert inside.removal_effect(model, tok, TEXT, [position]) == pytest.approx(float(effects[position]), abs=1e-5)


def test_removal_effect_as_key_and_from_the_pooling_by_hand(minilm):
    model, tok = minilm
    batch = tok(TEXT)
    n = batch["input_ids"].shape[1]
    removed = torch.ones(1, n, dtype=torch.bool)
    removed[0, [2, 5]] = False
    full = torch.ones(1, n, dtype=torch.bool)
    with torch.no_grad():
        base = model(**batch).last_hidden_state
        ids, types = batch["input_ids"], batch["token_type_ids"]
        as_key = model(ids, attention_mask=removed, token_type_ids=types).last_hidden_state

    def unit(hidden, mask):
        return bc.pooling.normalize(bc.pooling.mean_pooling(hidden, mask))[0]

    keys_only = 1 - float(unit(as_key, full) @ unit(base, full))
    pooled_only = 1 - float(unit(base, removed) @ unit(base, full))
    both = 1 - float(unit(as_key, removed) @ unit(base, full))
    assert inside.removal_effect(model, tok, TEXT, [2, 5], pooled=False) == pytest.approx(keys_only, abs=1e-5)
    assert inside.removal_effect(model, tok, TEXT, [2, 5], as_key=False) == pytest.approx(pooled_only, abs=1e-5)
    assert inside.removal_effect(model, tok, TEXT, [2, 5]) == pytest.approx(both, abs=1e-5)


@pytest.mark.parametrize(
    ("positions", "keywords", "error", "words"),
    [
        (3, {}, TypeError, "`positions` must be a non-empty list of token positions"),
        ([], {}, TypeError, "`positions` must be a non-empty list"),
        ([11], {}, ValueError, "got 11"),
        ([1], {"as_key": False, "pooled": False}, ValueError, "nothing would be removed"),
    ],
)
def test_removal_effect_errors(minilm, positions, keywords, error, words):
    with pytest.raises(error, match=words):
        inside.removal_effect(*minilm, TEXT, positions, **keywords)


# --- the value side ---------------------------------------------------------------------------------------


def test_value_weighted_norms_are_the_heads_share_of_the_output(tiny):
    """Summed over keys and heads, the vectors whose lengths are returned give the attention's output."""
    model, tok = tiny
    batch = tok(TEXT)
    attention = model.encoder.layers[1].attention
    with torch.no_grad():
        out = model(**batch, output_attentions=True, output_hidden_states=True)
        x = out.hidden_states[1]  # (1, seq, 32)
        values = bc.split_heads(attention.value(x), 4)  # (1, 4, seq, 8)
        weights = out.attentions[1]  # (1, 4, seq, seq)
        norms = inside.value_weighted_norms(weights, values, attention.output.weight)
        w_o = attention.output.weight  # (32, 32): out x in
        parts = torch.stack(
            [weights[0, h, :, :, None] * (values[0, h] @ w_o[:, h * 8 : (h + 1) * 8].T)[None, :, :] for h in range(4)]
        )  # (heads, seq queries, seq keys, hidden): a_ij v_j W_O^h
        expected_output = parts.sum(dim=(0, 2)) + attention.output.bias  # (seq, hidden)
        torch.testing.assert_close(expected_output[None], attention(x)[0], **TOL)
    torch.testing.assert_close(norms[0], parts.norm(dim=-1), **TOL)


def test_value_weighted_norms_check_their_arguments():
    attention, values = torch.rand(2, 5, 5).softmax(-1), torch.randn(2, 5, 3)
    with pytest.raises(ValueError, match=r"`attention` must be \(\.\.\., heads, seq, seq\)"):
        inside.value_weighted_norms(attention[:, :4], values, torch.randn(6, 6))
    with pytest.raises(ValueError, match=r"`output_weight` must be \(hidden, heads \* d_k\) = \(hidden, 6\)"):
        inside.value_weighted_norms(attention, values, torch.randn(6, 5))


def test_value_weighted_attention_over_a_padded_batch(minilm):
    model, tok = minilm
    sentences = ["The dog chased the ball across the garden.", "Why?"]
    valued = inside.value_weighted_attention(model, tok, sentences)
    assert valued.weights.shape == valued.norms.shape == (2, 6, 12, 11, 11)
    assert valued.lengths.shape == (2, 6, 12, 11) and valued.mask.sum(dim=-1).tolist() == [11, 4]
    torch.testing.assert_close(valued.norms, valued.weights * valued.lengths[..., None, :])
    alone = inside.value_weighted_attention(model, tok, ["Why?"])
    torch.testing.assert_close(valued.norms[1, ..., :4, :4], alone.norms[0], atol=1e-4, rtol=1e-4)


# --- roles of one's own, and the data the notebook runs on -----------------------------------------------


def test_word_piece_targets_by_hand():
    tokens = ["[CLS]", "un", "##bel", "##ie", "true", "shard", "##s", ".", "[SEP]"]
    targets = inside.word_piece_targets(tokens)
    expected = torch.zeros(9, 9, dtype=torch.bool)
    for group in ([1, 2, 3], [5, 6]):
        for i in group:
            for j in group:
                expected[i, j] = i != j
    assert torch.equal(targets, expected)
    with pytest.raises(TypeError, match="`tokens` must be a list of token strings"):
        inside.word_piece_targets("un ##bel")


def test_head_role_scores_with_roles_of_ones_own(minilm):
    model, tok = minilm
    sentences = list(inside.PROBE_SENTENCES[:5])
    default = inside.head_role_scores(model, tok, sentences)
    roles = {"left": lambda tokens: inside.role_targets(tokens)["previous token"], "pieces": inside.word_piece_targets}
    own = inside.head_role_scores(model, tok, sentences, roles=roles)
    assert set(own.scores) == {"left", "pieces"}
    torch.testing.assert_close(own.scores["left"], default.scores["previous token"])
    with pytest.raises(ValueError, match="role 'bad' must give a \\(seq, seq\\)"):
        inside.head_role_scores(model, tok, sentences, roles={"bad": lambda tokens: torch.zeros(2, 2)})
    with pytest.raises(TypeError, match="`roles` must be a dict"):
        inside.head_role_scores(model, tok, sentences, roles=["left"])


def test_the_packages_sentences_are_readable_and_distinct(minilm):
    model, tok = minilm
    assert len(inside.PROBE_SENTENCES) == 50 and len(set(inside.PROBE_SENTENCES)) == 50
    assert len(inside.ABLATION_PAIRS) >= 20 and len(set(inside.ABLATION_PAIRS)) == len(inside.ABLATION_PAIRS)
    assert len(inside.WORD_PIECE_SENTENCES) == 20
    for text in (*inside.PROBE_SENTENCES, *(s for pair in inside.ABLATION_PAIRS for s in pair)):
        inside.sentence_tokens(model, tok, text)
    pieces = sum(token.startswith("##") for text in inside.WORD_PIECE_SENTENCES for token in tok.tokenize(text))
    assert pieces >= 40  # full of split words


def test_determiner_phrases_point_at_a_determiner_and_its_noun_further_on(minilm):
    _, tok = minilm
    assert len(inside.DETERMINER_PHRASES) == 20
    for text, links in inside.DETERMINER_PHRASES:
        tokens = tok.tokenize(text)  # [CLS] first, at position 0
        for determiner, noun in links:
            assert tokens[determiner] in {"the", "a", "an"}, (text, tokens[determiner])
            assert noun - determiner >= 2 and tokens[noun].isalpha(), (text, tokens[noun])


def test_word_order_pairs_are_the_same_pieces_in_another_order_and_paraphrases_are_not(minilm):
    _, tok = minilm
    assert len(inside.WORD_ORDER_PAIRS) == 24 and len(inside.PARAPHRASE_PAIRS) == 24
    for a, b in inside.WORD_ORDER_PAIRS:  # a bag of word pieces cannot tell the two apart
        assert tok.tokenize(a) != tok.tokenize(b) and sorted(tok.tokenize(a)) == sorted(tok.tokenize(b)), (a, b)
    for a, b in inside.PARAPHRASE_PAIRS:
        assert sorted(tok.tokenize(a)) != sorted(tok.tokenize(b)), (a, b)
    texts = [s for pair in (*inside.WORD_ORDER_PAIRS, *inside.PARAPHRASE_PAIRS) for s in pair]
    assert len(set(texts)) == len(texts)
