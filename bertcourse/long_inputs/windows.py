"""Texts longer than BERT's 512 positions: truncation, and sliding windows with a stride.

BERT learned one position embedding for each of positions 0 ... 511 and has nothing past them
(notebook 04), so a longer text must be cut to fit. Two ways:

- **Truncation** keeps ``max_tokens`` of the text and drops the rest: the head (the start), the
  tail (the end), or the head and the tail together (Sun et al., 2019, kept 128 + 382 tokens
  for long reviews). Cheap, and whatever was dropped is lost.
- **Sliding windows** cut the text into windows of ``window`` tokens that start every ``stride``
  tokens, so that neighbours share ``overlap = window - stride`` tokens; each window becomes
  its own input ``[CLS] window [SEP]`` with positions 0 ... window + 1, and the results are
  merged. Every token is read, at the price of running the model on the overlaps twice.

Vocabulary, because the ecosystem mixes it up: here ``window`` counts the text's tokens in a
window (a window of 510 tokens is a 512-token input once [CLS] and [SEP] are added) and
``stride`` is how far a window moves, as the stride of a convolution. Hugging Face's tokenizer
calls the *overlap* ``stride`` (``return_overflowing_tokens=True, stride=...``);
``hf_overflow_arguments`` translates, and a test proves that both give the same windows.

Merging, two ways:

- a **sentence embedding** of the whole text is the mean over the windows of their mean-pooled
  embeddings, weighted by their number of tokens: the mean of every token vector computed;
- **token outputs** (one vector per token, for tagging or answer spans) are each taken from the
  window where the token sits most centrally: the one giving it the most context on its
  shorter side. A token near a window's edge sees only one side of its sentence.
  ``average_token_outputs`` is the other common choice, the mean of a token's rows in every
  window that holds it (the reference of notebook 11's first exercise, not re-exported by
  ``bertcourse.long_inputs``, so that the notebook's namespace does not answer it).
"""

from __future__ import annotations

import torch

from .._validation import can_check_values, counted, describe, is_int, require_integer_tensor, require_positive_int
from ..masks import as_bool_mask
from ..pooling import mean_pooling

TRUNCATIONS = ("head", "tail", "head+tail")


def truncate(ids: torch.Tensor, max_tokens: int, keep: str = "head", head_tokens: int | None = None) -> torch.Tensor:
    """Keep at most ``max_tokens`` of the token ids ``ids`` (n_tokens,): the head, the tail, or both.

    ``keep="head+tail"`` keeps the first ``head_tokens`` (default ``max_tokens // 4``) and the
    last ``max_tokens - head_tokens``. A text that already fits comes back whole.
    """
    _require_ids(ids)
    require_positive_int("max_tokens", max_tokens)
    if keep not in TRUNCATIONS:
        raise ValueError(f"`keep` must be one of {TRUNCATIONS}, got {keep!r}.")
    if head_tokens is None:
        head_tokens = max_tokens // 4
    if not is_int(head_tokens) or not 0 <= head_tokens <= max_tokens:
        raise ValueError(f"`head_tokens` must be an int from 0 to max_tokens={max_tokens}, got {head_tokens!r}.")
    return _truncate(ids, max_tokens, keep, head_tokens)


def _truncate(ids, max_tokens, keep, head_tokens):
    n_tokens = ids.shape[0]
    if n_tokens <= max_tokens:
        return ids  # (n_tokens,): it fits
    if keep == "head":
        return ids[:max_tokens]  # (max_tokens,)
    if keep == "tail":
        return ids[n_tokens - max_tokens :]  # (max_tokens,)
    tail_tokens = max_tokens - head_tokens
    return torch.cat([ids[:head_tokens], ids[n_tokens - tail_tokens :]])  # (max_tokens,)


def check_window(window: int, stride: int, max_positions: int | None = None) -> None:
    """Raise a clear error unless windows of ``window`` tokens moved by ``stride`` overlap and fit the model.

    ``max_positions`` is the model's position table (``config.max_position_embeddings``); a
    window needs two more positions for [CLS] and [SEP].
    """
    require_positive_int("window", window)
    if not is_int(stride):
        raise TypeError(f"`stride` must be a positive int, got {describe(stride)}.")
    if stride <= 0:
        raise ValueError(f"`stride` must be at least 1 (it is how far each window moves along the text), got {stride}.")
    if window <= stride:
        if window == stride:
            between = f"share window - stride = {counted(window - stride, 'token')}, so"
        else:  # a gap: no negative count of shared tokens
            between = (
                f"leave stride - window = {counted(stride - window, 'token')} between them that no window sees, and"
            )
        raise ValueError(
            f"`window`={window} must be larger than `stride`={stride}: neighbouring windows then {between} a name "
            "or an answer that crosses a window's end is cut in half and no window sees it whole. "
            f"Try stride={max(window * 3 // 4, 1)}."
        )
    if max_positions is not None:
        require_positive_int("max_positions", max_positions)
        if window + 2 > max_positions:
            raise ValueError(
                f"`window`={window} tokens plus [CLS] and [SEP] need {window + 2} positions, but the model "
                f"learned only max_position_embeddings={max_positions}: use window <= {max_positions - 2}."
            )


def window_spans(n_tokens: int, window: int, stride: int, max_positions: int | None = None) -> torch.Tensor:
    """Where the windows fall: a long tensor (n_windows, 2) of [start, end) token indices.

    Windows start at 0, stride, 2 * stride, ... and the last one is the first to reach the end of
    the text (it may be shorter than ``window``), exactly as Hugging Face's tokenizer places them.

    ``stride`` is the **step** between window starts, as in a convolution, not Hugging Face's
    tokenizer ``stride``, which is the **overlap** ``window - stride``: passing Hugging Face's
    number here gives other windows without any error (notebook 11, section 3.2). To cut the
    windows inside a Hugging Face tokenizer, use ``hf_overflow_arguments(window, stride)``.
    """
    require_positive_int("n_tokens", n_tokens)
    check_window(window, stride, max_positions)
    return _window_spans(n_tokens, window, stride)


def _window_spans(n_tokens, window, stride):
    """Starts every `stride` tokens until a window reaches the end of the text."""
    left_after_first = max(n_tokens - window, 0)  # tokens the first window does not cover
    n_windows = 1 + -(-left_after_first // stride)  # one more window per `stride` of them, rounded up
    starts = torch.arange(n_windows) * stride  # (n_windows,)
    ends = (starts + window).clamp(max=n_tokens)  # (n_windows,): the last window stops at the text's end
    return torch.stack([starts, ends], dim=1)  # (n_windows, 2)


def hf_overflow_arguments(window: int, stride: int) -> dict:
    """The arguments that make a Hugging Face tokenizer cut the same windows as ``window_spans``.

    Its ``max_length`` counts [CLS] and [SEP], and its ``stride`` is the *overlap*:
    ``tokenizer(text, **hf_overflow_arguments(window, stride))``.
    """
    check_window(window, stride)
    return {
        "max_length": window + 2,
        "stride": window - stride,
        "truncation": True,
        "return_overflowing_tokens": True,
    }


def content_ids(tokenizer, text: str) -> torch.Tensor:
    """The word-piece ids of ``text`` (n_tokens,), without [CLS] and [SEP] and without truncation."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"`text` must be a non-empty string, got {describe(text)}.")
    framed = tokenizer(text, max_length=len(text) + 2)["input_ids"][0]  # a word piece covers >= 1 character
    return framed[1:-1]  # (n_tokens,): [CLS] and [SEP] dropped


def window_batch(ids: torch.Tensor, spans: torch.Tensor, tokenizer) -> dict[str, torch.Tensor]:
    """One model input per window: ``[CLS] ids[start:end] [SEP]``, padded, with its attention mask.

    Returns a dict for ``model(**batch)``: ``input_ids``, ``attention_mask`` and ``token_type_ids``,
    each (n_windows, longest window + 2). Each window's positions restart at 0.
    """
    _require_ids(ids)
    _require_spans(spans, ids.shape[0])
    cls_id, sep_id = tokenizer("x")["input_ids"][0][[0, -1]].tolist()  # how this tokenizer frames a text
    return _window_batch(ids, spans, cls_id, sep_id, tokenizer.pad_token_id)


def _window_batch(ids, spans, cls_id, sep_id, pad_id):
    longest = int((spans[:, 1] - spans[:, 0]).max())
    input_ids = torch.full((spans.shape[0], longest + 2), pad_id, dtype=torch.long)  # (n_windows, longest + 2)
    attention_mask = torch.zeros_like(input_ids)  # (n_windows, longest + 2)
    for row, (start, end) in enumerate(spans.tolist()):
        input_ids[row, : end - start + 2] = torch.cat(
            [ids.new_tensor([cls_id]), ids[start:end], ids.new_tensor([sep_id])]
        )
        attention_mask[row, : end - start + 2] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": torch.zeros_like(input_ids)}


def central_windows(spans: torch.Tensor) -> torch.Tensor:
    """For each token, the window where it sits most centrally: a long tensor (n_tokens,).

    A token's context in a window is its distance to the nearer edge, min(i - start, end - 1 - i);
    the window with the most context wins, the earlier one on a tie. Every token must be covered.
    """
    _require_spans(spans)
    return _central_windows(spans)


def _central_windows(spans):
    n_tokens = int(spans[:, 1].max())
    best = torch.full((n_tokens,), -1)  # (n_tokens,): the most context seen so far
    owner = torch.full((n_tokens,), -1)  # (n_tokens,): the window that gave it
    for index, (start, end) in enumerate(spans.tolist()):
        positions = torch.arange(start, end)  # (end - start,)
        context = torch.minimum(positions - start, end - 1 - positions)  # (end - start,): distance to the nearer edge
        better = context > best[start:end]  # (end - start,), strictly: ties stay with the earlier window
        owner[start:end][better] = index
        best[start:end] = torch.maximum(best[start:end], context)
    uncovered = (owner < 0).nonzero().flatten()
    if uncovered.numel():
        raise ValueError(
            f"`spans` leave {uncovered.numel()} tokens in no window (the first is token {int(uncovered[0])}): "
            "every token needs a window for its output."
        )
    return owner  # (n_tokens,)


def merge_token_outputs(last_hidden_state: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
    """One vector per token of the long text (n_tokens, hidden), each from its most central window.

    last_hidden_state: (n_windows, seq, hidden), the model's output on ``window_batch(ids, spans, ...)``,
    whose row 0 is [CLS]: token i of window w sits at row ``1 + i - start_w``.
    """
    _require_spans(spans)
    _require_hidden_for_spans(last_hidden_state, spans)
    return _merge_token_outputs(last_hidden_state, spans)


def _merge_token_outputs(last_hidden_state, spans):
    owner = _central_windows(spans)  # (n_tokens,): the window each token is read from
    positions = torch.arange(owner.shape[0])  # (n_tokens,)
    rows = 1 + positions - spans[owner, 0]  # (n_tokens,): its row in that window, after [CLS]
    return last_hidden_state[owner, rows]  # (n_tokens, hidden)


def average_token_outputs(last_hidden_state: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
    """One vector per token of the long text (n_tokens, hidden): the mean of its rows in every window holding it.

    last_hidden_state: (n_windows, seq, hidden), the model's output on ``window_batch(ids, spans, ...)``,
    whose row 0 is [CLS]: token i of window w sits at row ``1 + i - start_w``. A token in one window
    gets that window's row; a token in an overlap, the mean of its rows. (``merge_token_outputs``
    takes the most central row instead.) Every token must be covered.
    """
    _require_spans(spans)
    _require_hidden_for_spans(last_hidden_state, spans)
    _central_windows(spans)  # raises if a token is in no window
    return _average_token_outputs(last_hidden_state, spans)


def _average_token_outputs(last_hidden_state, spans):
    n_tokens, hidden = int(spans[:, 1].max()), last_hidden_state.shape[-1]
    total = last_hidden_state.new_zeros(n_tokens, hidden)  # (n_tokens, hidden): the sum of each token's rows
    count = last_hidden_state.new_zeros(n_tokens, 1)  # (n_tokens, 1): how many windows hold each token
    for w, (start, end) in enumerate(spans.tolist()):
        total[start:end] += last_hidden_state[w, 1 : 1 + end - start]  # (end - start, hidden): the rows after [CLS]
        count[start:end] += 1
    return total / count  # (n_tokens, hidden)


def merge_sentence_embedding(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """One embedding for the whole text (hidden,): the windows' mean-pooled embeddings, weighted by their tokens.

    last_hidden_state: (n_windows, seq, hidden); attention_mask: (n_windows, seq), 1 at real tokens.
    The result is the mean of every real token vector of every window (overlaps count twice).
    """
    embeddings = mean_pooling(last_hidden_state, attention_mask)  # checks both; (n_windows, hidden)
    return _merge_sentence_embedding(embeddings, as_bool_mask("attention_mask", attention_mask))


def _merge_sentence_embedding(embeddings, mask):
    tokens = mask.sum(dim=1).to(embeddings.dtype)  # (n_windows,): real tokens in each window
    weights = tokens / tokens.sum()  # (n_windows,), sums to 1
    return (weights[:, None] * embeddings).sum(dim=0)  # (hidden,)


def _require_hidden_for_spans(last_hidden_state, spans) -> None:
    if not isinstance(last_hidden_state, torch.Tensor) or last_hidden_state.dim() != 3:
        raise ValueError(f"`last_hidden_state` must be (n_windows, seq, hidden), got {describe(last_hidden_state)}.")
    longest = int((spans[:, 1] - spans[:, 0]).max())
    if last_hidden_state.shape[0] != spans.shape[0] or last_hidden_state.shape[1] < longest + 2:
        raise ValueError(
            f"`last_hidden_state` must hold {spans.shape[0]} windows of at least {longest + 2} positions "
            f"(the windows of `spans` with [CLS] and [SEP]), got {describe(last_hidden_state)}."
        )


def _require_ids(ids) -> None:
    require_integer_tensor("ids", ids, hint="Token ids come from the tokenizer (see `content_ids`).")
    if ids.dim() != 1 or ids.shape[0] == 0:
        raise ValueError(
            f"`ids` must be the token ids of one text, shape (n_tokens,) with n_tokens >= 1, got {describe(ids)}."
        )


def _require_spans(spans, n_tokens: int | None = None) -> None:
    require_integer_tensor("spans", spans, hint="Spans come from `window_spans`.")
    if spans.dim() != 2 or spans.shape[1] != 2 or spans.shape[0] == 0:
        raise ValueError(f"`spans` must be (n_windows, 2) rows of [start, end), got {describe(spans)}.")
    if not can_check_values(spans):
        return
    starts, ends = spans[:, 0], spans[:, 1]
    if bool((starts < 0).any()) or bool((ends <= starts).any()):
        raise ValueError("`spans` must hold rows [start, end) with 0 <= start < end: see `window_spans`.")
    if n_tokens is not None and int(ends.max()) > n_tokens:
        raise ValueError(f"`spans` reach token {int(ends.max())}, past the end of `ids` ({n_tokens} tokens).")
