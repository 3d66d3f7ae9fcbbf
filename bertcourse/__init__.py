"""bertcourse: BERT built from scratch in PyTorch, one concept per module, in course order.

attention    Q/K/V projections, scores, scaled dot-product attention (notebooks 01-02)
masks        padding and causal masks, one convention: bool, True = may attend (03)
positional   sinusoidal encodings and learned positions (04)
multihead    split heads, merge heads, multi-head attention with W_O (05)
layernorm    LayerNorm from scratch (06)
feedforward  the GELU feed-forward block (06)
encoder      one Post-LN encoder layer, and the stack (06)
config       BertConfig with BERT-base and MiniLM presets (07)
bert         embeddings, BertModel, pooler, MLM and NSP heads (07)
counting     BERT's parameters, module by module (07)
pretrained   real weights from a Hugging Face folder or the offline MiniLM package (07)
tokenizer    WordPiece with [CLS]/[SEP], segments and padding (07)
exercises    checkers that diagnose a learner's mistake
plots, widgets  attention maps and interactive explorers
bench        our BertModel against Hugging Face's, timed (python -m bertcourse.bench)
"""

from .attention import attention_scores, qkv_projection, scaled_dot_product_attention
from .bert import BertModel, BertModelOutput, init_bert_weights
from .config import BertConfig
from .counting import count_parameters, parameter_breakdown
from .embeddings import BertEmbeddings, bert_embeddings
from .encoder import Encoder, EncoderLayer
from .feedforward import FeedForward, feed_forward, gelu
from .heads import BertForPreTraining
from .layernorm import LayerNorm, layer_norm
from .masks import (
    as_bool_mask,
    broadcast_mask,
    causal_mask,
    combine_masks,
    expand_padding_mask,
    fill_value,
    mask_from_attention_mask,
    padding_mask,
)
from .multihead import MultiHeadAttention, merge_heads, multi_head_attention, split_heads
from .positional import LearnedPositionEmbedding, sinusoidal_position_encoding
from .pretrained import load_pretrained
from .tokenizer import WordPieceTokenizer

__version__ = "0.1.0"

__all__ = [
    "BertConfig",
    "BertEmbeddings",
    "BertForPreTraining",
    "BertModel",
    "BertModelOutput",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "LayerNorm",
    "LearnedPositionEmbedding",
    "MultiHeadAttention",
    "WordPieceTokenizer",
    "as_bool_mask",
    "attention_scores",
    "bert_embeddings",
    "broadcast_mask",
    "causal_mask",
    "combine_masks",
    "count_parameters",
    "expand_padding_mask",
    "feed_forward",
    "fill_value",
    "gelu",
    "init_bert_weights",
    "layer_norm",
    "load_pretrained",
    "mask_from_attention_mask",
    "merge_heads",
    "multi_head_attention",
    "padding_mask",
    "parameter_breakdown",
    "qkv_projection",
    "scaled_dot_product_attention",
    "sinusoidal_position_encoding",
    "split_heads",
]
