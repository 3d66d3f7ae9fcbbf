"""The training loop: AdamW groups, the schedule, clipping, evaluation, seeded batches, checkpoints that
resume exactly, any model with a `.loss`, autocast and a grad scaler; one AdamW step equals Hugging Face's."""

from __future__ import annotations

import json
import time
import types

import pytest
import torch
from torch import nn

import bertcourse as bc
from bertcourse import training
from bertcourse.pretraining import PretrainingCollator, PretrainingMetrics, SpecialIds, held_out_batches
from bertcourse.training import (
    TRAINER_STATE_FILE,
    TRAINING_STATE_FILE,
    SeededBatches,
    decay_split,
    evaluate,
    linear_warmup_decay,
    load_checkpoint,
    lr_multiplier,
    make_optimizer,
    parameter_groups,
    save_checkpoint,
    seeded_generator,
    shard_batch,
    train,
    train_step,
)

SPECIALS = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4, vocab_size=50)
pretraining_metrics = PretrainingMetrics(SPECIALS)
CONFIG = bc.BertConfig(
    vocab_size=50,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=16,
)


def documents(n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        [torch.randint(5, 50, (int(torch.randint(3, 12, (1,), generator=g)),), generator=g) for _ in range(4)]
        for _ in range(n)
    ]


COLLATE = PretrainingCollator(documents(), SPECIALS, max_length=16)
HELD_OUT = held_out_batches(documents(seed=1), SPECIALS, max_length=16, batch_size=4)


def model(seed=0):
    torch.manual_seed(seed)
    return bc.BertForPreTraining(CONFIG)


def batches(seed=3):
    return SeededBatches(COLLATE.positions, 4, COLLATE, seed=seed)


# --- optimizer and schedule ----------------------------------------------------------------------


def test_no_weight_decay_on_biases_and_layer_norm_weights():
    m = model()
    decay, no_decay = decay_split(m)
    assert sorted(decay + no_decay) == sorted(name for name, _ in m.named_parameters())
    assert "bert.embeddings.word_embeddings.weight" in decay  # embeddings decay, as in BERT (tied decoder once)
    assert "bert.encoder.layers.0.attention.query.weight" in decay
    assert "bert.embeddings.layer_norm.weight" in no_decay and "bert.encoder.layers.1.output_norm.weight" in no_decay
    assert "mlm.bias" in no_decay and "bert.encoder.layers.0.attention.query.bias" in no_decay
    assert all(name.endswith("bias") or "norm" in name for name in no_decay)
    groups = parameter_groups(m, 0.01)
    assert [g["weight_decay"] for g in groups] == [0.01, 0.0]
    assert sum(len(g["params"]) for g in groups) == len(list(m.parameters()))
    with pytest.raises(ValueError, match="`weight_decay` must be a number >= 0"):
        parameter_groups(m, -1)
    with pytest.raises(ValueError, match="`lr` must be a positive number"):
        make_optimizer(m, 0)


def test_a_torch_layer_norm_gets_no_decay_either():
    m = nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3))
    assert decay_split(m) == (["0.weight"], ["0.bias", "1.weight", "1.bias"])


def test_schedule_equals_hugging_face_s_linear_warm_up_and_decay():
    transformers = pytest.importorskip("transformers")
    rates = []
    for make in (
        lambda opt: linear_warmup_decay(opt, 3, 10),
        lambda opt: transformers.get_linear_schedule_with_warmup(opt, 3, 10),
    ):
        optimizer = torch.optim.AdamW([nn.Parameter(torch.zeros(1))], lr=0.5)
        scheduler = make(optimizer)
        seen = []
        for _ in range(12):
            seen.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        rates.append(seen)
    assert rates[0] == pytest.approx(rates[1], abs=1e-12)
    assert rates[0][:4] == pytest.approx([0, 0.5 / 3, 1 / 3, 0.5]) and rates[0][10:] == [0, 0]
    assert lr_multiplier(5, 0, 10) == 0.5
    with pytest.raises(ValueError, match="`warmup_steps` must be an int from 0 to total_steps=10"):
        linear_warmup_decay(optimizer, 11, 10)


# --- one step, and an evaluation ----------------------------------------------------------------


def test_train_step_clips_the_gradient_and_reports_it():
    m = model()
    optimizer = make_optimizer(m, 1e-3)
    record = train_step(m, batches().batch(0), optimizer, clip_norm=1e-3)
    assert set(record) == {"loss", "mlm_loss", "nsp_loss", "lr", "grad_norm"}
    assert record["grad_norm"] > 1e-3  # the norm before clipping
    clipped = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in m.parameters() if p.grad is not None]))
    assert float(clipped) == pytest.approx(1e-3, rel=1e-3)
    assert record["loss"] == pytest.approx(record["mlm_loss"] + record["nsp_loss"], abs=1e-5)


def test_evaluate_turns_dropout_off_without_gradients_and_restores_the_mode():
    m = model().train()
    seen = []

    def metrics(batch, output):
        seen.append((output.loss.requires_grad, m.training))
        return {"loss": (output.loss, 1)}

    first, second = evaluate(m, HELD_OUT, metrics), evaluate(m, HELD_OUT, metrics)
    assert first == second, "dropout was off: two evaluations agree"
    assert set(seen) == {(False, False)} and m.training
    figures = evaluate(m, HELD_OUT, pretraining_metrics)
    assert {"mlm_loss", "mlm_accuracy", "mask_loss", "kept_accuracy", "nsp_loss", "nsp_recall_not_next"} <= set(figures)
    with pytest.raises(ValueError, match="nothing to evaluate"):
        evaluate(m, [])


# --- data order ----------------------------------------------------------------------------------


def test_a_batch_is_a_pure_function_of_the_step():
    a, b = batches(), batches()
    first = [a.batch(step) for step in (0, 1, 2, 7)]
    second = [b.batch(step) for step in (7, 2, 1, 0)][::-1]
    assert all(torch.equal(x[k], y[k]) for x, y in zip(first, second, strict=True) for k in x)
    assert not torch.equal(batches(seed=4).batch(0)["input_ids"], first[0]["input_ids"])
    per_epoch = len(a)
    assert per_epoch == len(COLLATE.positions) // 4
    assert sorted(a.order(0).tolist()) == list(range(len(COLLATE.positions)))
    assert not torch.equal(a.order(0), a.order(1)), "every epoch has its own order"


def test_shards_of_all_ranks_make_the_global_batch():
    whole = batches().batch(5)
    shards = [SeededBatches(COLLATE.positions, 4, COLLATE, seed=3, rank=r, world_size=2).batch(5) for r in range(2)]
    for name, value in whole.items():
        assert torch.equal(value[0::2], shards[0][name]) and torch.equal(value[1::2], shards[1][name])
    with pytest.raises(ValueError, match="`rank` must be an int in 0..world_size-1"):
        shard_batch(whole, 2, 2)


def test_seeded_batches_errors():
    with pytest.raises(ValueError, match="non-empty list"):
        SeededBatches([], 4, COLLATE)
    with pytest.raises(ValueError, match="larger than the 3 examples"):
        SeededBatches([1, 2, 3], 4, COLLATE)
    with pytest.raises(TypeError, match="`collate` must be a function"):
        SeededBatches([1, 2, 3], 2, None)
    assert seeded_generator(1, "a").initial_seed() == seeded_generator(1, "a").initial_seed()
    assert seeded_generator(1, "a").initial_seed() != seeded_generator(1, "b").initial_seed()


# --- the loop, checkpoints and resume ------------------------------------------------------------


class Crash(SeededBatches):
    """Batches that stop the run at one step, as a kernel that dies would."""

    def __init__(self, *args, crash_at, **kwargs):
        super().__init__(*args, **kwargs)
        self.crash_at = crash_at

    def batch(self, step):
        if step == self.crash_at:
            raise KeyboardInterrupt
        return super().batch(step)


def run(m, data, folder=None, resume=False):
    return train(
        m,
        data,
        steps=8,
        lr=3e-3,
        warmup_steps=2,
        eval_batches=HELD_OUT,
        eval_every=2,
        metrics=pretraining_metrics,
        checkpoint_dir=folder,
        checkpoint_every=3,
        resume=resume,
        progress=False,
    )


def test_a_resumed_run_equals_a_run_that_never_stopped(tmp_path):
    whole_model = model()
    whole = run(whole_model, batches())
    with pytest.raises(KeyboardInterrupt):
        run(model(), Crash(COLLATE.positions, 4, COLLATE, seed=3, crash_at=4), tmp_path)
    assert json.loads((tmp_path / TRAINER_STATE_FILE).read_text())["step"] == 3
    torch.manual_seed(99)  # another process: other random state, another initialisation
    resumed_model = model(seed=7)
    resumed = run(resumed_model, batches(), tmp_path, resume=True)
    for (name, a), b in zip(whole_model.state_dict().items(), resumed_model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert resumed.train == whole.train and resumed.evals == whole.evals and resumed.step == whole.step == 8
    assert [e["step"] for e in whole.evals] == [0, 2, 4, 6, 8]
    assert whole.train["lr"][:3] == pytest.approx([0, 1.5e-3, 3e-3])
    assert whole.evals[-1]["mlm_loss"] < whole.evals[0]["mlm_loss"], "it learns"


def test_a_checkpoint_is_a_model_folder_transformers_reads(tmp_path):
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    m = model()
    optimizer = make_optimizer(m, 1e-3)
    save_checkpoint(tmp_path, m, optimizer)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["config.json", "model.safetensors", TRAINING_STATE_FILE, TRAINER_STATE_FILE]
    )
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path)
    assert theirs.config.hidden_size == 16
    state = torch.load(tmp_path / TRAINING_STATE_FILE, weights_only=True)
    assert set(state) == {"optimizer", "scheduler", "scaler", "cpu_rng", "cuda_rng"}


def test_checkpoint_errors(tmp_path):
    m = model()
    m.save_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a checkpoint of `train`"):
        load_checkpoint(tmp_path, m, make_optimizer(m, 1e-3))
    with pytest.raises(TypeError, match="save_pretrained"):
        save_checkpoint(tmp_path, nn.Linear(2, 2), torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=1))


class Classifier(nn.Module):
    """Any model whose forward returns an object with `.loss` trains: here a bag-of-words classifier."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.EmbeddingBag(10, 2)

    def forward(self, input_ids, labels):
        logits = self.embedding(input_ids)
        return types.SimpleNamespace(logits=logits, loss=nn.functional.cross_entropy(logits, labels))


def classification_batches():
    examples = [(torch.tensor([i % 5, 5 + i % 2]), i % 2) for i in range(16)]

    def collate(chosen, generator):
        return {"input_ids": torch.stack([x for x, _ in chosen]), "labels": torch.tensor([y for _, y in chosen])}

    return SeededBatches(examples, 4, collate)


def test_train_trains_any_model_with_a_loss():
    torch.manual_seed(0)
    m = Classifier()
    history = train(
        m, classification_batches(), steps=30, lr=0.1, eval_batches=[classification_batches().batch(0)], progress=False
    )
    assert set(history.train) == {"loss", "lr", "grad_norm"}
    assert history.evals[-1]["loss"] < history.evals[0]["loss"] / 2


def test_a_model_without_a_loss_is_explained():
    m = model()
    batch = batches().batch(0)
    del batch["labels"], batch["next_sentence_label"]
    with pytest.raises(ValueError, match="without a scalar `.loss`: give it its labels"):
        train_step(m, batch, make_optimizer(m, 1e-3))


def test_autocast_and_a_grad_scaler_run(tmp_path):
    m = model()
    optimizer = make_optimizer(m, 1e-3)
    record = train_step(m, batches().batch(0), optimizer, autocast_dtype=torch.bfloat16)
    assert torch.isfinite(torch.tensor(record["loss"]))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    history = train(m, batches(), steps=2, optimizer=optimizer, scaler=scaler, checkpoint_dir=tmp_path, progress=False)
    assert history.step == 2
    assert torch.load(tmp_path / TRAINING_STATE_FILE, weights_only=True)["scaler"]["scale"] == 2.0**8


def test_progress_in_a_terminal_prints_one_line_per_evaluation(capsys):
    train(model(), batches(), steps=4, eval_batches=HELD_OUT, eval_every=2, metrics=pretraining_metrics)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["0/4", "2/4", "4/4", "4/4"]
    assert "held out: mlm_loss" in lines[0] and "last batch: loss" in lines[-1]


def test_train_argument_errors():
    with pytest.raises(ValueError, match="`steps` must be a positive int"):
        train(model(), batches(), steps=0)
    with pytest.raises(TypeError, match="`batches` must have a `batch\\(step\\)` method"):
        train(model(), [batches().batch(0)], steps=1)


# --- against Hugging Face ------------------------------------------------------------------------


def test_one_adamw_step_leaves_the_same_weights_as_hugging_face_s(tmp_path):
    """In float64: Adam's first step moves a weight by about lr * sign(gradient), so in float32 a gradient near 0
    that rounding gives the other sign in the other implementation moves that weight the other way (by up to 2 lr)."""
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    ours = model()
    ours.save_pretrained(tmp_path)
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path)
    before = {k: v.double() for k, v in ours.hf_state_dict().items()}
    batch = batches().batch(0)
    for m in (ours, theirs):
        m.double().eval()  # dropout off: both see the same network
        optimizer = make_optimizer(m, 1e-2)
        m(**batch).loss.backward()
        optimizer.step()
    mine, hf = ours.hf_state_dict(), theirs.state_dict()
    assert set(mine) <= set(hf)
    for name, value in mine.items():
        torch.testing.assert_close(value, hf[name], atol=1e-6, rtol=0, msg=name)
        assert not torch.equal(value, before[name]), f"{name} did not move"


def test_the_live_plot_redraws_at_most_every_few_seconds_and_always_at_the_end(monkeypatch):
    """A drawing costs a few tenths of a second: 32 quick steps must not pay for 32 of them."""
    from bertcourse import training as t

    drawn = []
    monkeypatch.setattr(t._LivePlot, "_image", lambda self, history: history.step)
    plot = t._LivePlot(32)

    class Handle:
        def update(self, image):
            drawn.append(image)

    plot.handle, clock = Handle(), [plot.drawn_at]
    monkeypatch.setattr(t.time, "perf_counter", lambda: clock[0])
    history = t.History()
    for step in range(32):
        history.record({"loss": 1.0})
        clock[0] += 0.25  # a quarter of a second per step
        plot(history, final=step == 31)
    assert drawn == [21, 32]  # the first step of 3 past 5 s of training, then the last step


def test_the_fastest_thread_count_is_measured_and_set():
    before = torch.get_num_threads()
    calls = []

    def step():  # slower with more threads, as on a busy machine
        calls.append(torch.get_num_threads())
        time.sleep(0.01 * torch.get_num_threads())

    try:
        assert training.fastest_thread_count(step, candidates=(1, 3), repeats=2) == 1
        assert torch.get_num_threads() == 1 and calls == [1, 1, 1, 3, 3, 3]
        with pytest.raises(ValueError, match="`candidates` must be a positive int"):
            training.fastest_thread_count(step, candidates=(0, 1))
    finally:
        torch.set_num_threads(before)
