"""Inputs longer than BERT's 512 positions (notebook 11): cut them, or make attention cheaper.

windows    truncation (head, tail, head + tail); sliding windows with a stride, merged into one
           sentence embedding or one vector per token; Hugging Face's overflow windows, translated
local      Longformer's banded mask with global tokens, and local attention that computes only the band
blockwise  exact attention over key/value blocks with an online softmax (the FlashAttention idea)
memory     peak memory of one call, measured with PyTorch's allocator statistics
costs      time and peak memory of attention methods at growing lengths, and their fitted power laws
"""

from .blockwise import block_attention, merge_softmax_blocks, softmax_block_state
from .costs import cost_slopes, cpu_seconds, loglog_slope, measure_costs, on_one_thread, plot_costs
from .local import banded_mask, local_attention, local_global_mask
from .memory import peak_memory
from .windows import (
    TRUNCATIONS,
    central_windows,
    check_window,
    content_ids,
    hf_overflow_arguments,
    merge_sentence_embedding,
    merge_token_outputs,
    truncate,
    window_batch,
    window_spans,
)

__all__ = [
    "TRUNCATIONS",
    "banded_mask",
    "block_attention",
    "central_windows",
    "check_window",
    "content_ids",
    "cost_slopes",
    "cpu_seconds",
    "hf_overflow_arguments",
    "local_attention",
    "local_global_mask",
    "loglog_slope",
    "measure_costs",
    "merge_sentence_embedding",
    "merge_softmax_blocks",
    "merge_token_outputs",
    "on_one_thread",
    "peak_memory",
    "plot_costs",
    "softmax_block_state",
    "truncate",
    "window_batch",
    "window_spans",
]
