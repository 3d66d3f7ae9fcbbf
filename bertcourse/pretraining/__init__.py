"""BERT's pretraining: a WordPiece vocabulary, masked tokens (MLM), sentence pairs (NSP), the recipe.

From raw documents to the batch ``BertForPreTraining`` learns from, in the order of notebook 09::

    tokenizer = train_wordpiece(texts, folder, vocab_size=2000)     # vocabulary: vocab.txt, read by WordPieceTokenizer
    specials = SpecialIds.from_tokenizer(tokenizer)                  # [PAD] [UNK] [CLS] [SEP] [MASK] ids
    documents = tokenize_documents(tokenizer, texts)                 # documents -> sentences -> token ids
    collate = PretrainingCollator(documents, specials, max_length=48)  # pairs: NSP pairs, truncated, collated
    batch = collate(collate.positions[:32], generator)               # masking: 15%, then 80/10/10, labels -100
    metrics = PretrainingMetrics(specials)                           # metrics: [MASK] apart from the rest

One module each: ``vocabulary``, ``masking``, ``pairs``, ``metrics`` (what pretraining is judged by:
the [MASK] positions against the unigram, most-frequent and copy baselines), ``fill_mask`` (looking
at a model), ``recipe`` (``pretrain``, the shipped longer run), ``checks``.

- **MLM**: 15% of the tokens that are not special are *selected* (each independently, as Hugging
  Face's collator does; BERT's ``create_pretraining_data.py`` picks exactly ``round(15% x n)`` per
  sequence, at most 20, and excludes only [CLS] and [SEP]); of those, 80% become [MASK], 10% a random
  token, 10% stay as they are. The label is the original token at the selected positions and -100
  everywhere else.
- **NSP**: B is A's next sentence half of the time (label 0, IsNext), a random sentence of another
  document otherwise (label 1, NotNext). A segment is one sentence (BERT packs several).
- **Truncation** (``truncate_pair``): while ``[CLS] A [SEP] B [SEP]`` is too long, drop the last
  token of the longer segment, of B on a tie. That is the fine-tuning rule (``transformers``'
  ``longest_first``). BERT's pretraining data script (``truncate_seq_pair``) drops the token from
  the front or the back of the longer segment at random, so that the model also sees sentences cut
  at their start; we keep the deterministic rule, so a pair always keeps the beginnings of its
  sentences.

Every random choice comes from a ``torch.Generator`` passed in explicitly, never from the global
random state: the same generator state gives the same batch, on every machine. ``training`` derives
one generator per step from the seed and the step number, which is what makes a resumed run
identical to one that never stopped.
"""

from ..heads import IGNORE_INDEX
from .checks import require_documents, require_generator, require_positions, require_share, require_texts
from .fill_mask import MaskingView, fill_mask, masking_view
from .masking import (
    MASK_SHARE,
    RANDOM_SHARE,
    mask_tokens,
    mlm_accuracy,
    mlm_corrupt,
    require_corrupt,
    whole_word_mask,
)
from .metrics import (
    COPY_SHARE,
    KINDS,
    POSITION_WEIGHT,
    PositionBaseline,
    PretrainingMetrics,
    WatchedMetrics,
    balanced_nsp_accuracy,
    context_figures,
    continuation_ids,
    masked_only_accuracy,
    mlm_baselines,
    neighbour_attention,
    nsp_by_text_kind,
    position_baseline,
    selected_kinds,
    swap_context,
    token_distribution,
    top_predictions,
)
from .pairs import (
    MAX_LENGTH,
    MIN_LENGTH,
    PretrainingCollator,
    collate_pairs,
    pair_positions,
    require_max_length,
    sample_nsp_pairs,
    truncate_pair,
)
from .recipe import (
    BATCH,
    LENGTH_CONTROL,
    LONG_CONTROL,
    LR,
    SHIPPED_RUN,
    SHIPPED_STEPS,
    SHORT_BATCH,
    SHORT_LENGTH,
    SHORT_SHARE,
    STEPS,
    LengthPhases,
    PretrainingData,
    PretrainingRun,
    break_out_step,
    held_out_batches,
    held_out_figures,
    load_length_control,
    load_long_control,
    load_shipped_run,
    position_counts,
    pretrain,
    pretraining_data,
    save_run,
    tiny_config,
)
from .vocabulary import SPECIAL_TOKENS, VOCAB_SIZE, SpecialIds, require_specials, tokenize_documents, train_wordpiece

__all__ = [
    "BATCH",
    "COPY_SHARE",
    "IGNORE_INDEX",
    "KINDS",
    "LR",
    "MASK_SHARE",
    "MAX_LENGTH",
    "MIN_LENGTH",
    "RANDOM_SHARE",
    "SHIPPED_RUN",
    "SHIPPED_STEPS",
    "SHORT_BATCH",
    "SHORT_LENGTH",
    "SHORT_SHARE",
    "SPECIAL_TOKENS",
    "STEPS",
    "VOCAB_SIZE",
    "LENGTH_CONTROL",
    "LONG_CONTROL",
    "LengthPhases",
    "MaskingView",
    "PretrainingCollator",
    "PretrainingData",
    "PretrainingMetrics",
    "WatchedMetrics",
    "PretrainingRun",
    "SpecialIds",
    "balanced_nsp_accuracy",
    "break_out_step",
    "collate_pairs",
    "context_figures",
    "continuation_ids",
    "fill_mask",
    "held_out_batches",
    "held_out_figures",
    "load_length_control",
    "load_long_control",
    "load_shipped_run",
    "mask_tokens",
    "masked_only_accuracy",
    "neighbour_attention",
    "nsp_by_text_kind",
    "masking_view",
    "mlm_accuracy",
    "mlm_baselines",
    "POSITION_WEIGHT",
    "PositionBaseline",
    "position_baseline",
    "position_counts",
    "mlm_corrupt",
    "pair_positions",
    "pretrain",
    "pretraining_data",
    "require_corrupt",
    "require_documents",
    "require_generator",
    "require_max_length",
    "require_positions",
    "require_share",
    "require_specials",
    "require_texts",
    "sample_nsp_pairs",
    "save_run",
    "selected_kinds",
    "swap_context",
    "tiny_config",
    "token_distribution",
    "tokenize_documents",
    "top_predictions",
    "train_wordpiece",
    "truncate_pair",
    "whole_word_mask",
]
