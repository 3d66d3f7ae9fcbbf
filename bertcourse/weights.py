"""Weights as the ecosystem moves them: Hugging Face's names <-> ours, ``from_pretrained`` and ``save_pretrained``.

Our modules have readable names (``encoder.layers.3.attention.query``); Hugging Face's BERT has
its own (``encoder.layer.3.attention.self.query``). One table of name pairs, below, maps every
weight both ways, so that

- ``Model.from_pretrained(folder)`` reads any Hugging Face BERT folder that has ``config.json``
  and ``model.safetensors`` (what ``transformers``' ``save_pretrained`` writes), and
- ``model.save_pretrained(folder)`` writes such a folder, with Hugging Face's key names, which
  ``transformers.BertModel.from_pretrained(folder)`` (or ``BertForPreTraining``, ...) reads.

Loading refuses to guess: every encoder weight of the model must be found and every weight of
the file used, or the error lists exactly what is missing and what is unexpected. A task head
that the checkpoint lacks (a classifier on a pretrained encoder) starts from BERT's
initialisation, as in Hugging Face, and is named in ``model.newly_initialized``. The decoder of
the MLM head *is* the word-embedding matrix, so it is saved once.

Safetensors only: a ``pytorch_model.bin`` is a pickle, and unpickling a file can run any code in
it. We never call ``torch.load`` on one and never run a repository's own code.

A model class opts in with ``HFWeightsMixin`` and says where its weights live: ``BertModel`` is
the encoder itself (``hf_encoder_prefix = ""``); a model with a head keeps its encoder as
``self.bert`` (Hugging Face's ``bert.`` prefix) and lists its head's own name pairs in
``hf_head_names``, e.g. ``(("classifier.", "classifier."),)``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import torch

from ._validation import describe
from .config import BertConfig

# (Hugging Face prefix, our prefix) for the encoder; "{i}" stands for a layer index.
ENCODER_NAMES = (
    ("embeddings.word_embeddings.", "embeddings.word_embeddings."),
    ("embeddings.position_embeddings.", "embeddings.position_embeddings."),
    ("embeddings.token_type_embeddings.", "embeddings.token_type_embeddings."),
    ("embeddings.LayerNorm.", "embeddings.layer_norm."),
    ("encoder.layer.{i}.attention.self.query.", "encoder.layers.{i}.attention.query."),
    ("encoder.layer.{i}.attention.self.key.", "encoder.layers.{i}.attention.key."),
    ("encoder.layer.{i}.attention.self.value.", "encoder.layers.{i}.attention.value."),
    ("encoder.layer.{i}.attention.output.dense.", "encoder.layers.{i}.attention.output."),
    ("encoder.layer.{i}.attention.output.LayerNorm.", "encoder.layers.{i}.attention_norm."),
    ("encoder.layer.{i}.intermediate.dense.", "encoder.layers.{i}.feed_forward.intermediate."),
    ("encoder.layer.{i}.output.dense.", "encoder.layers.{i}.feed_forward.output."),
    ("encoder.layer.{i}.output.LayerNorm.", "encoder.layers.{i}.output_norm."),
    ("pooler.dense.", "pooler.dense."),
)

# Heads of Hugging Face's task models: a bare encoder drops them when it loads such a checkpoint.
KNOWN_HEAD_PREFIXES = ("cls.", "classifier.", "qa_outputs.")

# BertForPreTraining's heads (heads.py), named here so that renaming needs no model class.
PRETRAINING_HEAD_NAMES = (
    ("cls.predictions.transform.dense.", "mlm.dense."),
    ("cls.predictions.transform.LayerNorm.", "mlm.layer_norm."),
    ("cls.predictions.bias", "mlm.bias"),
    ("cls.seq_relationship.", "nsp."),
)

# Keys a file may carry that no model weight corresponds to: the 0..511 buffer, and the MLM decoder,
# whose weight is the word embeddings and whose bias is ``cls.predictions.bias``.
DERIVED_KEYS = {"embeddings.position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


def _pattern(prefix: str) -> str:
    return re.escape(prefix).replace(r"\{i\}", r"(\d+)")


def rename(key: str, names, *, to_ours: bool = True) -> str | None:
    """``key`` renamed by the first matching pair of ``names`` (either direction); None if none matches."""
    for hf, ours in names:
        source, target = (hf, ours) if to_ours else (ours, hf)
        match = re.match(_pattern(source), key)
        if match:
            filled = target.replace("{i}", match.group(1)) if match.groups() else target
            return filled + key[match.end() :]
    return None


def hf_to_ours(key: str, prefixed: bool = False) -> str | None:
    """Our name for Hugging Face encoder or pretraining-head ``key``; None for a derived key we skip.

    ``prefixed`` means the model we load into keeps its encoder under ``bert.`` (a model with a head).
    Keys may come with or without Hugging Face's ``bert.`` prefix, and with the old ``gamma``/``beta``
    names of LayerNorm. A key that matches no pair comes back unchanged, so that it is reported.
    """
    key = _modern_key(key).removeprefix("bert.")
    if key in DERIVED_KEYS:
        return None
    renamed = rename(key, ENCODER_NAMES)
    if renamed is not None:
        return "bert." + renamed if prefixed else renamed
    return rename(key, PRETRAINING_HEAD_NAMES) or key


def _modern_key(key: str) -> str:
    return re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))


class HFWeightsMixin:
    """``from_pretrained`` / ``save_pretrained`` for a model built from a ``BertConfig``."""

    hf_encoder_prefix = "bert."  # where the encoder lives, in our model and in Hugging Face's
    hf_head_names: tuple[tuple[str, str], ...] = ()  # (Hugging Face prefix, our prefix) of the head's weights
    hf_architecture = ""  # the transformers class that reads what save_pretrained writes

    @classmethod
    def hf_names(cls) -> tuple[tuple[str, str], ...]:
        """Every (Hugging Face prefix, our prefix) pair of this model, encoder and head."""
        p = cls.hf_encoder_prefix
        return tuple((p + hf, p + ours) for hf, ours in ENCODER_NAMES) + tuple(cls.hf_head_names)

    # --- loading -----------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, folder, **kwargs):
        """A model built from ``folder/config.json`` with the weights of ``folder/model.safetensors``,
        in ``eval()`` mode. ``kwargs`` go to the constructor (e.g. ``num_labels`` of a classifier)."""
        folder = weights_folder(folder)
        values = read_config(folder)
        model = cls._from_hf_config(values, **kwargs)
        model.load_hf_state_dict(read_weights(folder))
        return model.eval()

    @classmethod
    def _from_hf_config(cls, values: dict, **kwargs):
        """Build the model from config.json's values; a task head overrides this to read its own keys."""
        return cls(BertConfig.from_dict(values), **kwargs)

    def load_hf_state_dict(self, hf_state: dict[str, torch.Tensor]) -> None:
        """Copy Hugging Face-named weights into this model; raise listing anything missing or unexpected.

        Nothing is copied unless everything fits. Head weights the checkpoint lacks keep their
        initialisation and are listed in ``self.newly_initialized``.
        """
        names = self.hf_names()
        ours = self.state_dict()
        renamed, unexpected = {}, []
        for key, tensor in hf_state.items():
            key = self._as_hf_key(_modern_key(key))
            if key is None:
                continue
            name = rename(key, names)
            if name is None:
                unexpected.append(key)
            elif name.startswith(self.hf_encoder_prefix + "pooler.") and name not in ours:
                continue  # a model built without the pooler (token-level heads) leaves it out, as Hugging Face does
            else:
                renamed[name] = tensor
        tied = self._tied_names()
        expected = {name for name in ours if name not in tied}
        missing = sorted(expected - renamed.keys())
        unexpected += sorted(renamed.keys() - expected)
        encoder_missing = [name for name in missing if name.startswith(self.hf_encoder_prefix) and name in expected]
        head_missing = [name for name in missing if name not in encoder_missing]
        if encoder_missing or unexpected or (head_missing and not self._heads_may_be_new()):
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
        self.load_state_dict(renamed, strict=False)
        self.newly_initialized = head_missing

    def _as_hf_key(self, key: str) -> str | None:
        """A file's key in this model's Hugging Face naming: the ``bert.`` prefix added or removed,
        derived keys dropped (None), and a bare encoder dropping the heads of a task checkpoint."""
        bare = key.removeprefix("bert.")
        if bare in DERIVED_KEYS:
            return None
        if self.hf_encoder_prefix == "":
            return None if bare.startswith(KNOWN_HEAD_PREFIXES) else bare
        is_encoder = rename(bare, ENCODER_NAMES) is not None
        return self.hf_encoder_prefix + bare if is_encoder else bare

    def _tied_names(self) -> set[str]:
        """Our state-dict names that are another weight under a second name (the MLM decoder)."""
        seen, tied = {}, set()
        for name, tensor in self.state_dict(keep_vars=True).items():
            if id(tensor) in seen:
                tied.add(name)
            seen.setdefault(id(tensor), name)
        return tied

    def _heads_may_be_new(self) -> bool:
        """A model with a head may start that head fresh from a checkpoint of the encoder alone."""
        return self.hf_encoder_prefix != ""

    # --- saving ------------------------------------------------------------------------------------

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """This model's weights under Hugging Face's names, each tied weight once, contiguous."""
        names = self.hf_names()
        tied = self._tied_names()
        state = {}
        for name, tensor in self.state_dict().items():
            if name in tied:
                continue
            state[rename(name, names, to_ours=False)] = tensor.detach().contiguous()
        return state

    def hf_config(self) -> dict:
        """config.json's values: our config under Hugging Face's names, plus what transformers needs."""
        values = dataclasses.asdict(self.config)
        values.update(
            model_type="bert",
            architectures=[self.hf_architecture],
            hidden_act="gelu",
            position_embedding_type="absolute",
            tie_word_embeddings=True,
        )
        return values

    def save_pretrained(self, folder) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``folder`` (created if needed); returns it."""
        from safetensors.torch import save_file

        folder = _as_folder_path("folder", folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CONFIG_FILE).write_text(json.dumps(self.hf_config(), indent=2) + "\n", encoding="utf-8")
        save_file(self.hf_state_dict(), str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
        return folder


def _as_folder_path(name: str, folder) -> Path:
    if not isinstance(folder, (str, Path)) and not hasattr(folder, "__fspath__"):
        raise TypeError(f"`{name}` must be a folder path (str or Path), got {describe(folder)}.")
    if not str(folder).strip():
        raise ValueError(f"`{name}` is empty: pass a folder.")
    return Path(folder).expanduser()


def weights_folder(folder, name: str = "folder") -> Path:
    """Check that ``folder`` (the argument called ``name``) is a Hugging Face model folder we can read,
    before reading anything."""
    folder = _as_folder_path(name, folder)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"`{name}` must be a folder with config.json and model.safetensors, got {str(folder)!r}, which is "
            "not a folder. A hub name like 'bert-base-uncased' must be downloaded first "
            "(`huggingface_hub.snapshot_download`), then pass the folder it returns."
        )
    if not (folder / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"`{name}`={str(folder)!r} is a folder without config.json.")
    if not (folder / WEIGHTS_FILE).is_file():
        pickles = sorted(p.name for p in folder.glob("*.bin"))
        if pickles:
            raise ValueError(
                f"`{name}`={str(folder)!r} holds {pickles[0]} but no model.safetensors. A .bin file is a pickle: "
                "loading it can run any code it contains, so this course reads safetensors only. Convert it once, "
                "with a file you trust: `transformers.BertModel.from_pretrained(folder).save_pretrained(folder)` "
                "writes model.safetensors (transformers' default)."
            )
        raise FileNotFoundError(f"`{name}`={str(folder)!r} is a folder without model.safetensors.")
    return folder


_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def read_config(folder: Path) -> dict:
    """``folder/config.json``'s values: a JSON object, or a ``ValueError`` that names the file and what it holds."""
    try:
        values = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"config.json in {folder.name!r} is not valid JSON: {error}") from None
    if not isinstance(values, dict):
        raise ValueError(
            f"config.json in {folder.name!r} holds a JSON {_JSON_KINDS.get(type(values), type(values).__name__)} "
            f"({json.dumps(values)[:60]}), but a model's config is a JSON object: "
            '{"hidden_size": 384, "num_hidden_layers": 6, ...}.'
        )
    return values


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / WEIGHTS_FILE))
