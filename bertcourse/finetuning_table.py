"""Notebook 10's table: six ways to classify the fresh/rotten reviews, judged on the same test reviews.

    python -m bertcourse.finetuning_table                      # every row, written to finetuning_table.json
    python -m bertcourse.finetuning_table --rows minilm_fine_tuned_all

Each row trains with ``bertcourse.training.train`` on the first ``examples`` reviews of the course's
training split (1,024 by default: a labelled set one person writes in an afternoon) and is judged on
every test review of ``corpus.review_split()``; it records its number of training examples, optimizer
steps, seconds (wall clock of the training, and of computing frozen features, not of the evaluation)
and the test accuracy:

    majority               always the most frequent training label
    bag_of_words           logistic regression on word counts (finetuning_data.BagOfWords)
    minilm_frozen          MiniLM untouched, a linear layer on its mean-pooled sentence vectors
    minilm_fine_tuned      MiniLM with a classification head, every weight trained (one epoch)
    tiny_pretrained        notebook 09's tiny BERT, pretrained here, then fine-tuned
    tiny_random            the same tiny BERT from random weights, fine-tuned the same way
    bag_of_words_all       the bag of words on all 10,202 training reviews
    minilm_fine_tuned_all  MiniLM fine-tuned on all 10,202 training reviews

Notebook 10 trains the rows that fit its two minutes (majority, bag_of_words, minilm_frozen,
minilm_fine_tuned) itself, with these same functions, and prints the whole table from the committed
``finetuning_table.json`` that this script writes. The tiny BERT is pretrained by this
script with notebook 09's ``pretraining.pretrain`` (``--pretraining-steps``; ``--tiny-folder`` keeps
the checkpoint, and reuses one that is already there): pretraining takes far longer than notebook
10 may, so notebook 10 never needs those weights and runs on its own, in any order.

Running a subset of rows (``--rows``) updates those rows of the JSON and keeps the others. The
seconds are the machine's: the file records its CPU count and torch's thread count beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from . import corpus
from .bert import BertModel
from .finetuning import BertForSequenceClassification
from .finetuning_data import (
    BagOfWords,
    LinearProbe,
    ReviewCollator,
    classification_metrics,
    majority_class,
    review_batches,
    sentence_features,
)
from .tokenizer import WordPieceTokenizer
from .training import SeededBatches, evaluate, train

TABLE_FILE = Path(__file__).with_name("finetuning_table.json")
EXAMPLES = 1024
MAX_LENGTH = 64  # word pieces: every review fits in MiniLM's vocabulary (the longest has 65 with [CLS] and [SEP])
LABEL_NAMES = list(corpus.LABELS)
TITLES = {
    "majority": "majority class",
    "bag_of_words": "bag-of-words logistic regression",
    "minilm_frozen": "MiniLM frozen, linear head on mean-pooled vectors",
    "minilm_fine_tuned": "MiniLM fine-tuned end to end",
    "tiny_pretrained": "tiny BERT (09), pretrained, fine-tuned",
    "tiny_random": "tiny BERT, random weights, fine-tuned",
    "bag_of_words_all": "bag-of-words logistic regression",
    "minilm_fine_tuned_all": "MiniLM fine-tuned end to end",
}
ROWS = tuple(TITLES)

# The recipes. MiniLM: one epoch at 3e-4 (a small model takes a larger rate than BERT-base's 2e-5 to 5e-5),
# 10% warm-up then linear decay. The tiny BERT: ten epochs at 5e-4, the same for both tiny rows.
MINILM_RECIPE = {"epochs": 1, "batch_size": 32, "lr": 3e-4}
TINY_RECIPE = {"epochs": 10, "batch_size": 32, "lr": 5e-4}
BAG_OF_WORDS_RECIPE = {"steps": 600, "batch_size": 64, "lr": 0.02}
PROBE_RECIPE = {"steps": 300, "batch_size": 64, "lr": 0.01}
PRETRAINING_STEPS = 2400  # four times notebook 09's run


def _row(name: str, examples: int, steps: int, started: tuple[float, float], accuracy: float) -> dict:
    wall, cpu = started
    return {
        "row": name,
        "model": TITLES[name],
        "examples": examples,
        "steps": steps,
        "seconds": round(time.perf_counter() - wall, 1),
        "cpu_seconds": round(time.process_time() - cpu, 1),
        "accuracy": round(accuracy, 4),
    }


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def majority_row(train_examples, test_examples, name: str = "majority") -> dict:
    """Always answer the most frequent label of ``train_examples``."""
    started = _clock()
    label = majority_class([y for _, y in train_examples])
    accuracy = sum(y == label for _, y in test_examples) / len(test_examples)
    return _row(name, len(train_examples), 0, started, accuracy)


def bag_of_words_row(train_examples, test_examples, name: str = "bag_of_words", seed: int = 0) -> dict:
    """Logistic regression on word counts, vocabulary from the training reviews, trained with the course loop."""
    started = _clock()
    torch.manual_seed(seed)
    model = BagOfWords.from_texts([text for text, _ in train_examples])
    recipe = BAG_OF_WORDS_RECIPE
    batch_size = min(recipe["batch_size"], len(train_examples))
    batches = SeededBatches(train_examples, batch_size, model.collate, seed=seed)
    train(model, batches, steps=recipe["steps"], lr=recipe["lr"], weight_decay=0.0, progress=False)
    row = _row(name, len(train_examples), recipe["steps"], started, 0.0)
    row["accuracy"] = round(evaluate(model, [model.collate(test_examples)], classification_metrics)["accuracy"], 4)
    return row


def train_probe(features, labels, seed: int = 0) -> LinearProbe:
    """A ``LinearProbe`` trained on fixed features (n, hidden) with the course loop and ``PROBE_RECIPE``."""
    torch.manual_seed(seed)
    probe = LinearProbe(features.shape[1], len(LABEL_NAMES))
    examples = LinearProbe.examples(features, labels)
    recipe = PROBE_RECIPE
    batches = SeededBatches(examples, min(recipe["batch_size"], len(examples)), probe.collate, seed=seed)
    train(probe, batches, steps=recipe["steps"], lr=recipe["lr"], weight_decay=0.0, progress=False)
    return probe


def probe_accuracy(probe: LinearProbe, features, labels) -> float:
    """The accuracy of a trained probe on fixed features."""
    return evaluate(probe, [probe.collate(LinearProbe.examples(features, labels))], classification_metrics)["accuracy"]


def frozen_probe_row(
    encoder, tokenizer, train_examples, test_examples, name: str = "minilm_frozen", seed: int = 0
) -> dict:
    """A linear layer on the frozen encoder's mean-pooled sentence vectors."""
    test_features = sentence_features(encoder, tokenizer, [t for t, _ in test_examples], max_length=MAX_LENGTH)["mean"]
    started = _clock()  # the features of the training reviews count, those of the test reviews do not
    features = sentence_features(encoder, tokenizer, [t for t, _ in train_examples], max_length=MAX_LENGTH)["mean"]
    labels, test_labels = [y for _, y in train_examples], [y for _, y in test_examples]
    probe = train_probe(features, labels, seed)
    row = _row(
        name, len(train_examples), PROBE_RECIPE["steps"], started, probe_accuracy(probe, test_features, test_labels)
    )
    return row


def fine_tune(
    model, tokenizer, train_examples, *, epochs: int, batch_size: int, lr: float, seed: int = 0, progress=False
):
    """The fine-tuning recipe: ``epochs`` passes over the examples, 10% warm-up, linear decay; returns the steps.

    Reviews are cut to ``MAX_LENGTH`` pieces, or to the model's position table if it is shorter.
    """
    batch_size = min(batch_size, len(train_examples))
    collate = ReviewCollator(tokenizer, max_length_for(model))
    batches = SeededBatches(train_examples, batch_size, collate, seed=seed)
    steps = epochs * len(batches)
    train(model, batches, steps=steps, lr=lr, warmup_steps=steps // 10, progress=progress)
    return steps


def fine_tuned_row(model, tokenizer, train_examples, test_examples, recipe: dict, name: str, seed: int = 0) -> dict:
    started = _clock()
    steps = fine_tune(model, tokenizer, train_examples, seed=seed, **recipe)
    row = _row(name, len(train_examples), steps, started, 0.0)
    batches = review_batches(test_examples, tokenizer, max_length=max_length_for(model))
    row["accuracy"] = round(evaluate(model, batches, classification_metrics)["accuracy"], 4)
    return row


def max_length_for(model) -> int:
    """``MAX_LENGTH``, or the model's position table if it is shorter (notebook 09's tiny BERT has 48 positions)."""
    return min(MAX_LENGTH, model.config.max_position_embeddings)


def minilm_classifier(seed: int = 0) -> BertForSequenceClassification:
    """MiniLM's encoder (the offline weights) with a fresh classification head for rotten/fresh."""
    from .pretrained import default_weights_dir

    torch.manual_seed(seed)
    return BertForSequenceClassification.from_pretrained(default_weights_dir(), num_labels=2, label_names=LABEL_NAMES)


def tiny_folder_ready(folder: Path) -> bool:
    return (folder / "model" / "model.safetensors").is_file() and (folder / "model" / "vocab.txt").is_file()


def pretrained_tiny(folder: Path, steps: int, seed: int = 0) -> Path:
    """Notebook 09's tiny BERT, pretrained into ``folder/model`` (kept if it is already there)."""
    from .pretraining import pretrain

    if not tiny_folder_ready(folder):
        pretrain(folder, steps=steps, seed=seed, progress=True)
    return folder / "model"


def tiny_rows(model_folder: Path, train_examples, test_examples, seed: int = 0) -> list[dict]:
    """The tiny BERT fine-tuned twice the same way: from its pretrained weights, and from random weights."""
    tokenizer = WordPieceTokenizer.from_folder(model_folder)
    encoder = BertModel.from_pretrained(model_folder)  # the encoder and its NSP-trained pooler; MLM and NSP heads left
    torch.manual_seed(seed)
    pretrained = BertForSequenceClassification(encoder.config, num_labels=2, label_names=LABEL_NAMES)
    pretrained.bert.load_state_dict(encoder.state_dict())
    torch.manual_seed(seed)  # the same head as the pretrained row's, on an encoder that stays random
    random = BertForSequenceClassification(encoder.config, num_labels=2, label_names=LABEL_NAMES)
    return [
        fine_tuned_row(pretrained, tokenizer, train_examples, test_examples, TINY_RECIPE, "tiny_pretrained", seed),
        fine_tuned_row(random, tokenizer, train_examples, test_examples, TINY_RECIPE, "tiny_random", seed),
    ]


def run(
    rows=ROWS, *, examples: int = EXAMPLES, pretraining_steps: int = PRETRAINING_STEPS, tiny_folder=None
) -> list[dict]:
    """Compute the named rows (in ``ROWS`` order) and return them."""
    from .pretrained import load_pretrained

    unknown = sorted(set(rows) - set(ROWS))
    if unknown:
        raise ValueError(f"unknown rows {unknown}; the rows are: {', '.join(ROWS)}.")
    split = corpus.review_split()
    few, every, test = split.train[:examples], split.train, split.test
    encoder, tokenizer = load_pretrained() if any(name.startswith("minilm") for name in rows) else (None, None)
    computed = {}
    for name in (row for row in ROWS if row in rows and row not in computed):
        print(f"--- {name}", flush=True)
        if name == "majority":
            computed[name] = majority_row(few, test)
        elif name.startswith("bag_of_words"):
            computed[name] = bag_of_words_row(every if name.endswith("_all") else few, test, name=name)
        elif name == "minilm_frozen":
            computed[name] = frozen_probe_row(encoder, tokenizer, few, test)
        elif name.startswith("minilm_fine_tuned"):
            data = every if name.endswith("_all") else few
            computed[name] = fine_tuned_row(minilm_classifier(), tokenizer, data, test, MINILM_RECIPE, name)
        else:  # the two tiny rows come from one pretraining
            with tempfile.TemporaryDirectory() as temporary:
                model_folder = pretrained_tiny(Path(tiny_folder or temporary), pretraining_steps)
                for row in tiny_rows(model_folder, few, test):
                    row["pretraining_steps"] = pretraining_steps
                    computed[row["row"]] = row
        print(json.dumps(computed[name]), flush=True)
    return [computed[name] for name in ROWS if name in rows]


def write_table(results: list[dict], path=TABLE_FILE, test_examples: int | None = None) -> dict:
    """Merge ``results`` into the JSON at ``path`` (rows by name, in ``ROWS`` order) and write it."""
    path = Path(path)
    table = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"rows": []}
    by_name = {row["row"]: row for row in table["rows"]}
    by_name.update({row["row"]: row for row in results})
    table["rows"] = [by_name[name] for name in ROWS if name in by_name]
    table["test_examples"] = test_examples or len(corpus.review_split().test)
    table["machine"] = {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__.split("+")[0],
        "python": platform.python_version(),
    }
    path.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return table


def load_table(path=TABLE_FILE) -> dict:
    """The committed table: {"rows": [...], "test_examples": ..., "machine": {...}}."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no {path.name} next to the package: run `python -m bertcourse.finetuning_table` to compute it."
        )
    return json.loads(path.read_text(encoding="utf-8"))


def format_table(rows: list[dict]) -> str:
    """The rows as an aligned text table: model, examples, steps, seconds (wall clock and CPU), test accuracy."""
    lines = [f"{'model':<52} {'examples':>8} {'steps':>6} {'seconds':>8} {'CPU s':>7} {'accuracy':>9}"]
    for row in rows:
        lines.append(
            f"{row['model']:<52} {row['examples']:>8,} {row['steps']:>6,} {row['seconds']:>8.1f} "
            f"{row.get('cpu_seconds', float('nan')):>7.1f} {100 * row['accuracy']:>8.1f}%"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bertcourse.finetuning_table", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rows", nargs="+", default=list(ROWS), choices=ROWS, help="the rows to compute (default: all)"
    )
    parser.add_argument("--examples", type=int, default=EXAMPLES, help="training reviews of the few-example rows")
    parser.add_argument("--pretraining-steps", type=int, default=PRETRAINING_STEPS, help="the tiny BERT's pretraining")
    parser.add_argument("--tiny-folder", default=None, help="keep (or reuse) the pretrained tiny BERT here")
    parser.add_argument("--output", default=str(TABLE_FILE), help="the JSON file to update")
    args = parser.parse_args(argv)
    results = run(
        args.rows, examples=args.examples, pretraining_steps=args.pretraining_steps, tiny_folder=args.tiny_folder
    )
    table = write_table(results, args.output)
    print(format_table(table["rows"]))
    return table


if __name__ == "__main__":
    main()
