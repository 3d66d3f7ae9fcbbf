"""The full BERT encoder: embeddings, the encoder stack and the pooler, wired together.

Every piece was built in an earlier module; this one only wires them together:

- ``BertEmbeddings`` (``bertcourse.embeddings``): token + learned position + token-type
  (segment) embeddings, summed, then LayerNorm and dropout.
- ``Encoder`` (``bertcourse.encoder``): ``num_hidden_layers`` Post-LN layers.
- ``BertPooler``: tanh(W h_[CLS] + b), the sentence vector the NSP head reads.

The pretraining heads (MLM, NSP) are in ``bertcourse.heads``.

``BertModel.forward`` checks its input once, at its border (integer ids, in the vocabulary,
not longer than the position table, a 0/1 mask of the same shape); the layers inside trust it.
Checks that read values (the id range) run on CPU tensors only, never on a GPU (where reading
a value back waits for the device) nor while ``torch.compile`` traces the model.

It returns a ``BertModelOutput`` whose ``attentions`` are a tuple of (batch, heads, seq, seq)
tensors, one per layer: the format Hugging Face and bertviz use (``bertcourse.plots`` shows how
to hand them to bertviz).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ._validation import can_check_values
from .config import BertConfig, require_config
from .embeddings import BertEmbeddings, check_same_shape, check_token_ids
from .encoder import Encoder
from .layernorm import LayerNorm
from .masks import as_bool_mask, expand_padding_mask
from .weights import HFWeightsMixin


@dataclasses.dataclass
class BertModelOutput:
    """What ``BertModel`` returns. ``attentions`` is empty unless ``output_attentions=True``."""

    last_hidden_state: torch.Tensor  # (batch, seq, hidden)
    pooler_output: torch.Tensor | None  # (batch, hidden); None for a model built without the pooler
    attentions: tuple[torch.Tensor, ...] = ()  # num_layers x (batch, heads, seq, seq)
    hidden_states: tuple[torch.Tensor, ...] = ()  # (num_layers + 1) x (batch, seq, hidden)


class BertPooler(nn.Module):
    """tanh(dense(h_[CLS])): (batch, seq, hidden) -> (batch, hidden)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))  # (batch, hidden)


class BertModel(HFWeightsMixin, nn.Module):
    """BERT's encoder: forward(input_ids, attention_mask=None, token_type_ids=None,
    output_attentions=False, output_hidden_states=False) -> BertModelOutput.

    ``BertModel.from_pretrained(folder)`` and ``model.save_pretrained(folder)`` read and write
    Hugging Face folders (``bertcourse.weights``).
    """

    hf_encoder_prefix = ""  # the model *is* the encoder: Hugging Face saves a BertModel without `bert.`
    hf_architecture = "BertModel"

    def __init__(self, config: BertConfig | None = None, add_pooling_layer: bool = True):
        super().__init__()
        require_config(config)
        self.config = config or BertConfig()
        c = self.config
        self.embeddings = BertEmbeddings(c)
        self.encoder = Encoder(
            c.num_hidden_layers,
            d_model=c.hidden_size,
            num_heads=c.num_attention_heads,
            d_ff=c.intermediate_size,
            dropout_p=c.hidden_dropout_prob,
            attention_dropout_p=c.attention_probs_dropout_prob,
            eps=c.layer_norm_eps,
        )
        # Token-level heads (named entities, answer spans) never read the pooled vector: Hugging Face builds
        # them without the pooler, and so can we.
        self.pooler = BertPooler(c) if add_pooling_layer else None
        self.apply(lambda module: init_bert_weights(module, c.initializer_range))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertModelOutput:
        mask = self._check_inputs(input_ids, attention_mask, token_type_ids)
        x = self.embeddings(input_ids, token_type_ids)  # (batch, seq, hidden)
        x, hidden_states, attentions = self.encoder(
            x, mask, need_weights=output_attentions, need_hidden_states=output_hidden_states
        )
        return BertModelOutput(
            last_hidden_state=x,
            pooler_output=None if self.pooler is None else self.pooler(x),
            attentions=attentions,
            hidden_states=hidden_states,
        )

    def _check_inputs(self, input_ids, attention_mask, token_type_ids):
        """Validate everything before computing anything; return the (batch, 1, 1, seq) mask or None."""
        c = self.config
        check_token_ids(
            input_ids,
            token_type_ids,
            vocab_size=c.vocab_size,
            type_vocab_size=c.type_vocab_size,
            max_position_embeddings=c.max_position_embeddings,
            device=self.embeddings.word_embeddings.weight.device,
        )
        if attention_mask is None:
            return None
        mask = as_bool_mask("attention_mask", attention_mask)
        check_same_shape("attention_mask", mask, input_ids)
        if can_check_values(mask) and bool(mask.all()):
            return None  # nothing to mask: let the fused kernel run unmasked
        return expand_padding_mask(mask.to(input_ids.device))  # (batch, 1, 1, seq)


def init_bert_weights(module: nn.Module, std: float = 0.02) -> None:
    """BERT's initialisation: weights ~ N(0, 0.02), biases 0, LayerNorm gamma 1 / beta 0,
    and the padding token's embedding 0."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=std)
        nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=std)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
