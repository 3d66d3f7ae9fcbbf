"""BERT's hyper-parameters in one dataclass, with the two presets the course uses.

The field names are Hugging Face's (``hidden_size``, ``num_attention_heads``, ...), so a
``config.json`` from the hub loads with ``BertConfig.from_dict``; unknown keys in such a
file (``architectures``, ``transformers_version``, ...) are ignored.
"""

from __future__ import annotations

import dataclasses

from ._validation import describe, is_int, require_divisible, require_positive_int, require_probability


@dataclasses.dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    pad_token_id: int = 0

    def __post_init__(self):
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            require_probability(name, getattr(self, name))
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            require_positive_int(name, getattr(self, name))
        if not is_int(self.pad_token_id) or not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"`pad_token_id`={self.pad_token_id!r} must be an id below vocab_size={self.vocab_size}.")
        require_divisible(self.hidden_size, self.num_attention_heads)

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def bert_base(cls) -> BertConfig:
        """BERT-base (uncased): 12 layers, 768 wide, 12 heads of 64, FFN 3072; ~110M parameters."""
        return cls()

    @classmethod
    def minilm_l6(cls) -> BertConfig:
        """all-MiniLM-L6-v2: 6 layers, 384 wide, 12 heads of 32, FFN 1536; ~22.7M parameters."""
        return cls(hidden_size=384, num_hidden_layers=6, intermediate_size=1536)

    @classmethod
    def from_dict(cls, values: dict) -> BertConfig:
        """The config of a ``config.json``'s values (a dict); keys that are not fields are ignored."""
        if not isinstance(values, dict):
            raise TypeError(
                f"`values` must be a dict of BertConfig's fields (a config.json's object), got {describe(values)}."
            )
        names = {f.name for f in dataclasses.fields(cls)}
        if values.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"only the exact GELU is supported, got hidden_act={values['hidden_act']!r}.")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                "only learned absolute positions are supported, got "
                f"position_embedding_type={values['position_embedding_type']!r}."
            )
        return cls(**{k: v for k, v in values.items() if k in names})


def require_config(config) -> None:
    """Raise ``TypeError`` unless ``config`` is a ``BertConfig`` (``None`` is allowed where a default exists)."""
    if config is not None and not isinstance(config, BertConfig):
        hint = (
            " Build one with `BertConfig(**values)` or `BertConfig.from_dict(values)`."
            if isinstance(config, dict)
            else ""
        )
        raise TypeError(f"`config` must be a BertConfig, got {describe(config)}.{hint}")
