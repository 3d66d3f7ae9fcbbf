"""NSP's sentence pairs, longest-first truncation, and the collated batch ``BertForPreTraining`` takes.

Sentence A is a sentence of a document that has a next sentence; B is that next sentence half of
the time (label 0, IsNext) and a random sentence of another document otherwise (label 1, NotNext):
Hugging Face's label convention. Simplified from BERT, which packs several sentences into each
segment to fill the length: here a segment is one sentence.
"""

from __future__ import annotations

import torch

from .._validation import describe, require_integer_tensor
from .checks import require_documents, require_generator, require_positions, require_share
from .masking import mask_tokens, require_corrupt
from .vocabulary import SpecialIds, require_specials

MAX_LENGTH = 48  # notebook 09's [CLS] A [SEP] B [SEP], in tokens
MIN_LENGTH = 8  # [CLS] A [SEP] B [SEP] with a few tokens each: shorter pairs teach nothing


def pair_positions(documents) -> list[tuple[int, int]]:
    """(document, sentence) of every sentence that has a next sentence: the possible sentence A's."""
    documents = require_documents(documents)
    return [(d, s) for d, document in enumerate(documents) for s in range(len(document) - 1)]


def sample_nsp_pairs(
    documents, positions, *, generator: torch.Generator, next_probability: float = 0.5
) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """(A, B, label) for each (document, sentence) position: B is A's next sentence with
    ``next_probability`` (label 0), else a random sentence of another document (label 1)."""
    documents = require_documents(documents)
    require_generator(generator)
    require_share("next_probability", next_probability)
    positions = require_positions(positions, documents)
    n = len(positions)
    is_next = torch.rand(n, generator=generator) < next_probability  # (n,)
    other = torch.randint(len(documents) - 1, (n,), generator=generator)  # (n,): another document ...
    where = torch.rand(n, generator=generator)  # (n,): ... and a place in it
    pairs = []
    for (d, s), follows, o, u in zip(positions, is_next.tolist(), other.tolist(), where.tolist(), strict=True):
        if follows:
            pairs.append((documents[d][s], documents[d][s + 1], 0))
        else:
            o += o >= d  # skip A's own document
            pairs.append((documents[d][s], documents[o][int(u * len(documents[o]))], 1))
    return pairs


def truncate_pair(a: torch.Tensor, b: torch.Tensor, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Longest first: cut the ends of ``a`` and ``b`` until ``[CLS] a [SEP] b [SEP]`` fits in ``max_length``.

    On a tie ``b`` loses a token, as in BERT's ``create_pretraining_data.py``. Hugging Face's tokenizers cut ``a``
    on a tie (``truncation="longest_first"``, measured with transformers 5.24): for 10 + 10 tokens at
    ``max_length=18`` this keeps 8 + 7, Hugging Face 7 + 8.
    """
    for name, ids in (("a", a), ("b", b)):
        require_integer_tensor(name, ids)
        if ids.dim() != 1:
            raise ValueError(f"`{name}` must be one sentence's ids (1-D), got {describe(ids)}.")
    require_max_length(max_length)
    return _truncate_pair(a, b, max_length)


def _truncate_pair(a, b, max_length):
    budget = max_length - 3  # [CLS] a [SEP] b [SEP]
    len_a, len_b = len(a), len(b)
    while len_a + len_b > budget:
        if len_a > len_b:
            len_a -= 1  # the longer one loses its last token ...
        else:
            len_b -= 1  # ... B on a tie
    return a[:len_a], b[:len_b]


def collate_pairs(
    pairs,
    specials: SpecialIds,
    *,
    generator: torch.Generator,
    max_length: int = MAX_LENGTH,
    mlm_probability: float = 0.15,
    corrupt=None,
):
    """(A, B, label) pairs -> the batch ``BertForPreTraining`` takes, MLM-masked.

    Returns a dict of (batch, seq) long tensors ``input_ids``, ``attention_mask``, ``token_type_ids``,
    ``labels`` and the (batch,) ``next_sentence_label``; seq is the longest pair, at most ``max_length``.
    ``corrupt``: the 80/10/10 rule ``mask_tokens`` applies (None: the package's ``mlm_corrupt``).
    """
    require_specials(specials)
    require_generator(generator)
    require_max_length(max_length)
    require_share("mlm_probability", mlm_probability)
    if not isinstance(pairs, (list, tuple)) or not pairs:
        raise ValueError(f"`pairs` must be a non-empty list of (A, B, label), got {describe(pairs)}.")
    cls, sep = torch.tensor([specials.cls]), torch.tensor([specials.sep])
    rows = []
    for a, b, _ in pairs:
        a, b = _truncate_pair(a, b, max_length)
        rows.append((torch.cat([cls, a, sep, b, sep]), len(a) + 2))  # ids, length of [CLS] A [SEP]
    seq = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), seq), specials.pad)  # (batch, seq)
    token_type_ids = torch.zeros(len(rows), seq, dtype=torch.long)  # (batch, seq)
    attention_mask = torch.zeros(len(rows), seq, dtype=torch.long)  # (batch, seq)
    for i, (ids, first) in enumerate(rows):
        input_ids[i, : len(ids)] = ids
        token_type_ids[i, first : len(ids)] = 1  # B [SEP]
        attention_mask[i, : len(ids)] = 1
    masked, labels = mask_tokens(input_ids, specials, generator=generator, probability=mlm_probability, corrupt=corrupt)
    return {
        "input_ids": masked,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
        "labels": labels,
        "next_sentence_label": torch.tensor([label for _, _, label in pairs]),
    }


class PretrainingCollator:
    """``collator(positions, generator) -> batch``: NSP pairs for the given sentence positions, collated and masked.

    ``collator.positions`` lists every possible sentence A (``pair_positions``): the examples of one
    epoch. ``training.SeededBatches(collator.positions, batch_size, collator, seed)`` orders them.
    ``corrupt``: the 80/10/10 rule, with ``mlm_corrupt``'s signature (None: the package's); notebook 09
    trains with the learner's.
    """

    def __init__(
        self,
        documents,
        specials: SpecialIds,
        *,
        max_length: int = MAX_LENGTH,
        mlm_probability: float = 0.15,
        next_probability: float = 0.5,
        corrupt=None,
    ):
        self.documents = require_documents(documents)
        require_corrupt(corrupt)
        self.corrupt = corrupt
        require_specials(specials)
        require_max_length(max_length)
        require_share("mlm_probability", mlm_probability)
        require_share("next_probability", next_probability)
        self.specials = specials
        self.max_length = max_length
        self.mlm_probability = mlm_probability
        self.next_probability = next_probability
        self.positions = pair_positions(self.documents)

    def __call__(self, positions, generator: torch.Generator) -> dict[str, torch.Tensor]:
        pairs = sample_nsp_pairs(self.documents, positions, generator=generator, next_probability=self.next_probability)
        return collate_pairs(
            pairs,
            self.specials,
            generator=generator,
            max_length=self.max_length,
            mlm_probability=self.mlm_probability,
            corrupt=self.corrupt,
        )


def require_max_length(max_length) -> None:
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < MIN_LENGTH:
        raise ValueError(
            f"`max_length` must be an int of at least {MIN_LENGTH} ([CLS] A [SEP] B [SEP] needs room for both "
            f"sentences), got {max_length!r}."
        )
