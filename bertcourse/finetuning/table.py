"""Notebook 10's table: ways to classify the fresh/rotten reviews, all judged on the same test reviews.

    python -m bertcourse.finetuning.table                      # every row, written to table.json
    python -m bertcourse.finetuning.table --rows tiny_pretrained tiny_random

Each row trains with ``bertcourse.training.train`` on the first ``examples`` reviews of the course's
training split (1,024 by default: a labelled set one person writes in an afternoon) and is judged on
every test review of ``corpus.review_split()``; it records its number of training examples, optimizer
steps, seconds (wall clock of the training, and of computing frozen features, not of the evaluation)
and the test accuracy:

    majority               always the most frequent training label
    bag_of_words           logistic regression on word counts (baselines.BagOfWords)
    minilm_frozen          MiniLM untouched, a linear layer on its mean-pooled sentence vectors
    minilm_fine_tuned      MiniLM with a classification head, every weight trained (one epoch), rate chosen on dev
    tiny_pretrained        notebook 09's tiny BERT, the shipped pretrained checkpoint, fine-tuned
    tiny_random            the same tiny BERT from random weights, fine-tuned the same way
    minilm_random          MiniLM's shape and vocabulary from random weights, fine-tuned the same way
    tiny_pretrained_frozen the pretrained tiny BERT untouched, a linear layer on its mean-pooled vectors
    tiny_random_frozen     the same from random weights (a new random encoder per seed)
    bag_of_words_all       the bag of words on all 10,202 training reviews
    minilm_fine_tuned_all  MiniLM fine-tuned on all 10,202 training reviews

**The dev set chooses, the test set reports.** The rows that fine-tune a whole encoder try each
learning rate of their ``RATES`` entry and keep the one with the best mean accuracy on the dev reviews
(every dev accuracy is recorded in the row, under ``dev_accuracy``); only the chosen rate's models are
then judged on the test reviews, once. The three rows of notebook 09's tiny BERT and of the random
models (``tiny_pretrained``, ``tiny_random``, ``minilm_random``) share one recipe, ``SCRATCH_RECIPE``,
and run over ``SEEDS`` (seed = the head's initialisation, the random encoder's, dropout and the order of
the batches) and report the mean test accuracy over the seeds, with ``test_accuracies``, min, max and
standard deviation beside it. The tiny rows try every rate with every seed and keep the rate of the best
mean dev accuracy (one seed can be lucky, or collapse); a MiniLM-sized run takes many minutes on a busy
2-core machine, so ``minilm_random`` tries its rates with the first seed and runs any other seeds at the
rate chosen (``selection`` in each row says which).

The tiny BERT is the longer run of notebook 09's recipe that ships with the package
(``pretraining.load_shipped_run``, ``--tiny-folder`` for another one); this script does no pretraining.
The random rows take its config and vocabulary (tiny) or MiniLM's (``minilm_random``), not its weights.

Notebook 10 trains the rows that fit its time (majority, bag_of_words, minilm_frozen and
minilm_fine_tuned at the chosen rate) itself, with these same functions, and prints the whole table
from the committed ``table.json`` (beside this module) that this script writes.

Running a subset of rows (``--rows``) updates those rows of the JSON and keeps the others. The
seconds are the machine's: each row records its machine (CPU count, torch's thread count, the load
average when it started) and the date it was computed; a row kept from an earlier run keeps its own.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from .. import corpus
from .._validation import describe
from ..config import BertConfig
from ..training import SeededBatches, evaluate, train
from .baselines import BagOfWords, LinearProbe, majority_class, sentence_features
from .heads import BertForSequenceClassification
from .reviews import ReviewCollator, classification_metrics, review_batches

TABLE_FILE = Path(__file__).with_name("table.json")
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
    "minilm_random": "MiniLM-sized BERT, random weights, fine-tuned",
    "tiny_pretrained_frozen": "tiny BERT (09) pretrained, frozen, probe on mean",
    "tiny_random_frozen": "tiny BERT, random weights, frozen, probe on mean",
    "bag_of_words_all": "bag-of-words logistic regression",
    "minilm_fine_tuned_all": "MiniLM fine-tuned end to end",
}
ROWS = tuple(TITLES)
SEEDED_ROWS = ("tiny_pretrained", "tiny_random", "minilm_random")

# The recipes. MiniLM: one epoch, 10% warm-up then linear decay, the rate chosen on dev from
# RATES["minilm_fine_tuned"] (BERT-base is usually tuned at 2e-5 to 5e-5; those rates are not tried here). The
# tiny BERT and the MiniLM-sized random model: SCRATCH_RECIPE, the same for the three rows, at most 48 pieces (the
# tiny BERT's position table), each row's rate chosen on dev from its own RATES entry.
MINILM_RECIPE = {"epochs": 1, "batch_size": 32, "lr": 3e-4}
SCRATCH_RECIPE = {"epochs": 3, "batch_size": 32, "max_length": 48}
RATES = {
    "minilm_fine_tuned": (3e-4, 1e-3),  # 1e-3: the rate of a frozen head (notebook 10, pitfall 1)
    "tiny_pretrained": (3e-4, 1e-3, 3e-3),
    "tiny_random": (3e-4, 1e-3, 3e-3),
    "minilm_random": (1e-4, 3e-4),
}
SEEDS = (0, 1, 2)
BAG_OF_WORDS_RECIPE = {"steps": 600, "batch_size": 64, "lr": 0.02}
PROBE_RECIPE = {"steps": 300, "batch_size": 64, "lr": 0.01}
LABEL_COUNTS = (64, 128, 256, 512)  # the label curve's training-set sizes


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


def rate_key(lr: float) -> str:
    """A learning rate as the JSON's key: 0.0003 -> "3e-04"."""
    return f"{lr:.0e}"


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


def label_curve(
    features, examples, dev_features, dev_examples, sizes=LABEL_COUNTS, subsets: int = 3
) -> dict[int, dict[str, list[float]]]:
    """What pretraining is worth in labels: the bag of words against a linear probe on a frozen encoder's features.

    For each size n of ``sizes`` and each subset k < ``subsets``, both train on the same n examples, the first n
    of a permutation of ``examples`` seeded k (so one k's subsets are nested), with ``bag_of_words_row``'s and
    ``train_probe``'s recipes, and are judged on ``dev_examples``. ``features`` (len(examples), hidden) and
    ``dev_features`` (len(dev_examples), hidden) hold one row per example, e.g. ``sentence_features(...)["mean"]``.
    Returns ``{n: {"bag_of_words": [accuracy per subset], "probe": [accuracy per subset]}}``.
    """
    if len(features) != len(examples) or len(dev_features) != len(dev_examples):
        raise ValueError(
            f"one feature row per example: {len(features)} rows for {len(examples)} examples, "
            f"{len(dev_features)} dev rows for {len(dev_examples)} dev examples."
        )
    if not sizes or any(not 0 < n <= len(examples) for n in sizes) or subsets < 1:
        raise ValueError(f"`sizes` must be between 1 and {len(examples)}, and `subsets` at least 1.")
    dev_labels = [y for _, y in dev_examples]
    curve = {n: {"bag_of_words": [], "probe": []} for n in sizes}
    for k in range(subsets):
        order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(k)).tolist()
        for n in sizes:
            chosen = order[:n]
            subset = [examples[i] for i in chosen]
            curve[n]["bag_of_words"].append(bag_of_words_row(subset, dev_examples, seed=k)["accuracy"])
            probe = train_probe(features[chosen], [y for _, y in subset], seed=k)
            curve[n]["probe"].append(round(probe_accuracy(probe, dev_features, dev_labels), 4))
    return curve


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
    model,
    tokenizer,
    train_examples,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int = 0,
    max_length: int = MAX_LENGTH,
    progress=False,
    eval_batches=None,
    eval_every: int | None = None,
):
    """The fine-tuning recipe: ``epochs`` passes over the examples, 10% warm-up, linear decay; returns the History.

    Reviews are cut to ``max_length`` pieces, or to the model's position table if it is shorter. With
    ``eval_batches`` (dev batches, say), the model's loss and accuracy on them are recorded every
    ``eval_every`` steps in ``history.evals``.
    """
    batch_size = min(batch_size, len(train_examples))
    collate = ReviewCollator(tokenizer, max_length_for(model, max_length))
    batches = SeededBatches(train_examples, batch_size, collate, seed=seed)
    steps = epochs * len(batches)
    metrics = classification_metrics if eval_batches is not None else None
    return train(
        model,
        batches,
        steps=steps,
        lr=lr,
        warmup_steps=steps // 10,
        progress=progress,
        eval_batches=eval_batches,
        eval_every=eval_every,
        metrics=metrics,
    )


def accuracy_on(model, tokenizer, examples, max_length: int = MAX_LENGTH) -> float:
    """The model's accuracy on (text, label) examples, cut as in training (eval mode, no gradients)."""
    batches = review_batches(examples, tokenizer, max_length=max_length_for(model, max_length))
    return evaluate(model, batches, classification_metrics)["accuracy"]


def fine_tuned_row(model, tokenizer, train_examples, test_examples, recipe: dict, name: str, seed: int = 0) -> dict:
    """One model fine-tuned with ``recipe`` (its rate given, not chosen) and judged on ``test_examples``."""
    started = _clock()
    steps = fine_tune(model, tokenizer, train_examples, seed=seed, **recipe).step
    row = _row(name, len(train_examples), steps, started, 0.0)
    row["lr"] = recipe["lr"]
    row["accuracy"] = round(accuracy_on(model, tokenizer, test_examples, recipe.get("max_length", MAX_LENGTH)), 4)
    return row


def choose_on_dev(runs) -> tuple[float, float]:
    """The learning rate of the best mean dev accuracy, and the mean test accuracy of its runs.

    ``runs``: a list of dicts, one per fine-tuning run, each with "lr", "seed", "dev" and "test" (the run's
    accuracies). Each rate's runs are averaged over their seeds; the dev set chooses, the test set only
    reports the chosen rate (the first of the best on a tie, in the order of ``runs``).
    """
    if not isinstance(runs, (list, tuple)) or not runs:
        raise ValueError(f"`runs` must be a non-empty list of dicts, got {describe(runs)}.")
    for run in runs:
        if not isinstance(run, dict) or not {"lr", "dev", "test"} <= set(run):
            raise ValueError(f"each run must be a dict with 'lr', 'dev' and 'test', got {describe(run)}.")
    return _choose_on_dev(runs)


def _choose_on_dev(runs):
    by_rate = {}
    for run in runs:
        by_rate.setdefault(run["lr"], []).append(run)  # the runs of each rate, one per seed
    dev = {lr: statistics.fmean(run["dev"] for run in group) for lr, group in by_rate.items()}
    chosen = max(by_rate, key=dev.get)  # chosen on dev, never on test
    return chosen, statistics.fmean(run["test"] for run in by_rate[chosen])  # test: opened once, for the report


def chosen_on_dev_row(
    name: str,
    build,
    tokenizer,
    train_examples,
    dev_examples,
    test_examples,
    *,
    recipe: dict,
    rates,
    seeds=SEEDS,
    every_seed_every_rate: bool = True,
) -> dict:
    """Fine-tune ``build(seed)`` at each rate, choose the rate on dev, judge the chosen rate's models on test once.

    ``recipe`` is ``fine_tune``'s arguments without ``lr``. With ``every_seed_every_rate``, every rate
    runs with every seed and the best mean dev accuracy wins; without it, the rates run with the first
    seed only and the other seeds run at the chosen rate. The row's ``accuracy`` is the mean test
    accuracy of the chosen rate over ``seeds``; ``seconds`` the mean training time of one run.
    """
    started_row = time.perf_counter()
    seeds, rates = list(seeds), list(rates)
    models, seconds, cpu_seconds, dev = {}, [], [], {rate_key(lr): {} for lr in rates}
    steps = 0

    def run_one(lr: float, seed: int) -> None:
        nonlocal steps
        model = build(seed)
        wall, cpu = _clock()
        steps = fine_tune(model, tokenizer, train_examples, seed=seed, lr=lr, **recipe).step
        seconds.append(time.perf_counter() - wall)
        cpu_seconds.append(time.process_time() - cpu)
        accuracy = accuracy_on(model, tokenizer, dev_examples, recipe.get("max_length", MAX_LENGTH))
        dev[rate_key(lr)][str(seed)] = round(accuracy, 4)
        models[lr, seed] = model
        print(f"{name}: lr {rate_key(lr)}, seed {seed}: dev accuracy {accuracy:.4f} ({seconds[-1]:.0f} s)", flush=True)

    for lr in rates:
        for seed in seeds if every_seed_every_rate else seeds[:1]:
            run_one(lr, seed)
    dev_mean = {key: statistics.fmean(values.values()) for key, values in dev.items()}
    chosen = max(rates, key=lambda lr: dev_mean[rate_key(lr)])  # the first of the best, on a tie
    for lr, seed in list(models):
        if lr != chosen:
            del models[lr, seed]  # only the chosen rate's models are judged on test
    for seed in seeds:
        if (chosen, seed) not in models:
            run_one(chosen, seed)
    dev_mean = {key: statistics.fmean(values.values()) for key, values in dev.items()}  # with those seeds
    test = [
        round(accuracy_on(models[chosen, seed], tokenizer, test_examples, recipe.get("max_length", MAX_LENGTH)), 4)
        for seed in seeds
    ]
    row = {
        "row": name,
        "model": TITLES[name],
        "examples": len(train_examples),
        "steps": steps,
        "seconds": round(statistics.fmean(seconds), 1),
        "cpu_seconds": round(statistics.fmean(cpu_seconds), 1),
        "accuracy": round(statistics.fmean(test), 4),
        "lr": chosen,
        "seeds": seeds,
        "test_accuracies": test,
        "accuracy_min": min(test),
        "accuracy_max": max(test),
        "dev_accuracy": dev,
        "dev_mean": {key: round(value, 4) for key, value in dev_mean.items()},
        "selection": (
            "every rate with every seed; the rate of the best mean dev accuracy"
            if every_seed_every_rate
            else f"every rate with seed {seeds[0]}; the rate of the best dev accuracy, then the other seeds at it"
        ),
        "recipe": dict(recipe),
        "runs": len(seconds),
        "row_seconds": round(time.perf_counter() - started_row, 1),
    }
    if len(test) > 1:
        row["accuracy_std"] = round(statistics.stdev(test), 4)
    return row


def max_length_for(model, max_length: int = MAX_LENGTH) -> int:
    """``max_length``, or the model's position table if it is shorter (notebook 09's tiny BERT has 48 positions)."""
    return min(max_length, model.config.max_position_embeddings)


def minilm_classifier(seed: int = 0) -> BertForSequenceClassification:
    """MiniLM's encoder (the offline weights) with a fresh classification head for rotten/fresh."""
    from ..pretrained import default_weights_dir

    torch.manual_seed(seed)
    return BertForSequenceClassification.from_pretrained(default_weights_dir(), num_labels=2, label_names=LABEL_NAMES)


def random_classifier(config: BertConfig, seed: int = 0) -> BertForSequenceClassification:
    """A classifier of ``config``'s shape from random weights (BERT's initialisation), seeded."""
    torch.manual_seed(seed)
    return BertForSequenceClassification(config, num_labels=2, label_names=LABEL_NAMES)


def pretrained_classifier(encoder, seed: int = 0) -> BertForSequenceClassification:
    """``encoder``'s weights (a ``BertModel``, its pooler included) under a fresh head: the same head as
    ``random_classifier(encoder.config, seed)``'s, so the two rows differ only in where the encoder starts."""
    model = random_classifier(encoder.config, seed)
    model.bert.load_state_dict(encoder.state_dict())
    return model


def tiny_rows(
    folder, train_examples, dev_examples, test_examples, rows=("tiny_pretrained", "tiny_random"), seeds=SEEDS
) -> list[dict]:
    """The tiny BERT of ``folder`` (a shipped run) fine-tuned from its pretrained weights and from random ones."""
    from ..pretraining import load_shipped_run

    pretrained, tokenizer, record = load_shipped_run(folder)
    encoder = pretrained.bert  # the encoder and its NSP-trained pooler; the MLM and NSP heads stay behind
    builders = {
        "tiny_pretrained": lambda seed: pretrained_classifier(encoder, seed),
        "tiny_random": lambda seed: random_classifier(encoder.config, seed),
    }
    results = []
    for name in rows:
        row = chosen_on_dev_row(
            name,
            builders[name],
            tokenizer,
            train_examples,
            dev_examples,
            test_examples,
            recipe=SCRATCH_RECIPE,
            rates=RATES[name],
            seeds=seeds,
        )
        row["vocabulary"] = {"size": tokenizer.vocab_size, "sha256": vocabulary_hash(folder)}  # the same for both
        if name == "tiny_pretrained":
            row["pretraining"] = pretraining_figures(record)
        results.append(row)
    return results


def pretraining_figures(record: dict) -> dict:
    """What a shipped run's ``run.json`` says of its pretraining: steps, seconds, and the held-out [MASK]-only
    figures against the context-free baselines on the same positions (notebook 09's measure)."""
    held_out = record.get("held_out", {})
    model, baselines = held_out.get("model", {}), held_out.get("baselines", {})
    figures = {"steps": record.get("recipe", {}).get("steps"), "seconds": record.get("seconds")}
    for name, value in (
        ("mask_loss", model.get("mask_loss")),
        ("mask_unigram_loss", baselines.get("mask_unigram_loss")),
        ("mask_accuracy", model.get("mask_accuracy")),
        ("mask_most_frequent_accuracy", baselines.get("mask_most_frequent_accuracy")),
    ):
        if value is not None:
            figures[name] = round(value, 4)
    return figures


def vocabulary_hash(folder) -> str:
    """The SHA-256 of a checkpoint's vocab.txt: two tiny rows with the same hash read the same word pieces."""
    import hashlib

    return hashlib.sha256((Path(folder) / "vocab.txt").read_bytes()).hexdigest()


def tiny_frozen_rows(
    folder, train_examples, test_examples, rows=("tiny_pretrained_frozen", "tiny_random_frozen"), seeds=SEEDS
) -> list[dict]:
    """A linear probe on the mean-pooled vectors of the tiny BERT, frozen: pretrained, and from random weights.

    What pretraining put into the vectors before any fine-tuning. Over ``seeds`` (the probe's, and the random
    encoder's), with the probe recipe of ``minilm_frozen``; the reviews cut at the tiny BERT's 48 positions.
    """
    from ..pretraining import load_shipped_run

    pretrained, tokenizer, _ = load_shipped_run(folder)
    texts, labels = [t for t, _ in train_examples], [y for _, y in train_examples]
    test_texts, test_labels = [t for t, _ in test_examples], [y for _, y in test_examples]
    length = max_length_for(pretrained.bert)
    results = []
    for name in rows:
        seconds, cpu_seconds, test = [], [], []
        for seed in seeds:
            encoder = (
                pretrained.bert
                if name == "tiny_pretrained_frozen"
                else random_classifier(pretrained.bert.config, seed).bert
            )
            encoder.eval()
            wall, cpu = _clock()
            features = sentence_features(encoder, tokenizer, texts, max_length=length)["mean"]
            probe = train_probe(features, labels, seed)
            seconds.append(time.perf_counter() - wall)
            cpu_seconds.append(time.process_time() - cpu)
            test_features = sentence_features(encoder, tokenizer, test_texts, max_length=length)["mean"]
            test.append(round(probe_accuracy(probe, test_features, test_labels), 4))
        row = {
            "row": name,
            "model": TITLES[name],
            "examples": len(train_examples),
            "steps": PROBE_RECIPE["steps"],
            "seconds": round(statistics.fmean(seconds), 1),
            "cpu_seconds": round(statistics.fmean(cpu_seconds), 1),
            "accuracy": round(statistics.fmean(test), 4),
            "seeds": list(seeds),
            "test_accuracies": test,
            "accuracy_min": min(test),
            "accuracy_max": max(test),
            "vocabulary": {"size": tokenizer.vocab_size, "sha256": vocabulary_hash(folder)},
        }
        if len(test) > 1:
            row["accuracy_std"] = round(statistics.stdev(test), 4)
        results.append(row)
    return results


def minilm_random_row(tokenizer, train_examples, dev_examples, test_examples, seeds=SEEDS) -> dict:
    """MiniLM's shape and vocabulary from random weights, fine-tuned as the tiny rows (rates tried on one seed)."""
    config = BertConfig.minilm_l6()
    return chosen_on_dev_row(
        "minilm_random",
        lambda seed: random_classifier(config, seed),
        tokenizer,
        train_examples,
        dev_examples,
        test_examples,
        recipe=SCRATCH_RECIPE,
        rates=RATES["minilm_random"],
        seeds=seeds,
        every_seed_every_rate=False,
    )


def run(rows=ROWS, *, examples: int = EXAMPLES, tiny_folder=None, seeds=SEEDS) -> list[dict]:
    """Compute the named rows (in ``ROWS`` order) and return them."""
    from ..pretrained import load_pretrained
    from ..pretraining import SHIPPED_RUN

    unknown = sorted(set(rows) - set(ROWS))
    if unknown:
        raise ValueError(f"unknown rows {unknown}; the rows are: {', '.join(ROWS)}.")
    split = corpus.review_split()
    few, every, dev, test = split.train[:examples], split.train, split.dev, split.test
    encoder, tokenizer = load_pretrained() if any(name.startswith("minilm") for name in rows) else (None, None)
    computed = {}
    for name in (row for row in ROWS if row in rows and row not in computed):
        print(f"--- {name}", flush=True)
        load = round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None
        if name == "majority":
            computed[name] = majority_row(few, test)
        elif name.startswith("bag_of_words"):
            computed[name] = bag_of_words_row(every if name.endswith("_all") else few, test, name=name)
        elif name == "minilm_frozen":
            computed[name] = frozen_probe_row(encoder, tokenizer, few, test)
        elif name == "minilm_fine_tuned":
            recipe = {key: value for key, value in MINILM_RECIPE.items() if key != "lr"}
            computed[name] = chosen_on_dev_row(
                name, minilm_classifier, tokenizer, few, dev, test, recipe=recipe, rates=RATES[name], seeds=seeds[:1]
            )
        elif name == "minilm_fine_tuned_all":
            computed[name] = fine_tuned_row(minilm_classifier(), tokenizer, every, test, MINILM_RECIPE, name)
        elif name == "minilm_random":
            computed[name] = minilm_random_row(tokenizer, few, dev, test, seeds)
        elif name.endswith("_frozen"):  # the two frozen tiny rows share one checkpoint
            wanted = [row for row in ("tiny_pretrained_frozen", "tiny_random_frozen") if row in rows]
            for row in tiny_frozen_rows(tiny_folder or SHIPPED_RUN, few, test, wanted, seeds):
                row["load_average"] = load
                computed[row["row"]] = row
        else:  # the two fine-tuned tiny rows share one checkpoint
            wanted = [row for row in ("tiny_pretrained", "tiny_random") if row in rows]
            for row in tiny_rows(tiny_folder or SHIPPED_RUN, few, dev, test, wanted, seeds):
                row["load_average"] = load
                computed[row["row"]] = row
        computed[name]["load_average"] = load
        print(json.dumps(computed[name]), flush=True)
    return [computed[name] for name in ROWS if name in rows]


def machine() -> dict:
    """The machine a row was computed on: CPU count, torch's threads, versions."""
    return {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__.split("+")[0],
        "python": platform.python_version(),
    }


def write_table(results: list[dict], path=TABLE_FILE, test_examples: int | None = None) -> dict:
    """Merge ``results`` into the JSON at ``path`` (rows by name, in ``ROWS`` order) and write it.

    The rows of ``results`` get this machine and today's date (UTC); a kept row keeps its own (a row
    from a file without per-row machines gets the file's former ``machine``).
    """
    path = Path(path)
    table = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"rows": []}
    former = table.pop("machine", None)
    by_name = {}
    for row in table["rows"]:
        if former is not None and "machine" not in row:
            row["machine"] = former
        by_name[row["row"]] = row
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    by_name.update({row["row"]: {**row, "machine": machine(), "date": today} for row in results})
    table["rows"] = [by_name[name] for name in ROWS if name in by_name]
    table["test_examples"] = test_examples or len(corpus.review_split().test)
    path.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return table


def load_table(path=TABLE_FILE) -> dict:
    """The committed table: {"rows": [...], "test_examples": ...}; each row with its machine."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no {path.name} next to the package: run `python -m bertcourse.finetuning.table` to compute it."
        )
    return json.loads(path.read_text(encoding="utf-8"))


def format_table(rows: list[dict], seconds: bool = True) -> str:
    """The rows as an aligned text table: model, examples, steps, seconds (wall clock and CPU; left out with
    ``seconds=False``), the rate, test accuracy, and for the rows over seeds the number of seeds and their lowest
    and highest accuracy."""
    timing = f" {'seconds':>7} {'CPU s':>6}" if seconds else ""
    lines = [f"{'model':<49} {'examples':>8} {'steps':>5}{timing} {'lr':>5} {'accuracy':>8}  over seeds"]
    for row in rows:
        lr = rate_key(row["lr"]).replace("e-0", "e-") if "lr" in row else "-"
        spread = ""
        if len(row.get("test_accuracies", ())) > 1:
            spread = f"{len(row['test_accuracies'])}: {100 * row['accuracy_min']:.1f}-{100 * row['accuracy_max']:.1f}%"
        timing = f" {row['seconds']:>7.1f} {row.get('cpu_seconds', float('nan')):>6.1f}" if seconds else ""
        lines.append(
            f"{row['model']:<49} {row['examples']:>8,} {row['steps']:>5,}{timing} {lr:>5} "
            f"{100 * row['accuracy']:>7.1f}%  {spread}".rstrip()
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bertcourse.finetuning.table", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rows", nargs="+", default=list(ROWS), choices=ROWS, help="the rows to compute (default: all)"
    )
    parser.add_argument("--examples", type=int, default=EXAMPLES, help="training reviews of the few-example rows")
    parser.add_argument(
        "--tiny-folder", default=None, help="the pretrained tiny BERT (default: the run shipped in the package)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="the seeds of the seeded rows")
    parser.add_argument("--output", default=str(TABLE_FILE), help="the JSON file to update")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = run(args.rows, examples=args.examples, tiny_folder=args.tiny_folder, seeds=tuple(args.seeds))
    table = write_table(results, args.output)
    print(format_table(table["rows"]))
    print(f"computed {', '.join(args.rows)} in {time.perf_counter() - started:.0f} s")
    return table


if __name__ == "__main__":
    main()
