"""Data parallel on 2 CPU processes (gloo): the same weights as one process, faults that end, exact resume.

Each torchrun job starts 3 Python processes; on a loaded 2-core machine that takes 15-30 s, so the
jobs are few and shared by the tests through module-scoped fixtures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import bertcourse as bc
from bertcourse.distributed import (
    JobTimeout,
    WorkerError,
    accumulation_step,
    demo_config,
    make_dataset,
    rank_batch,
    run_job,
    torchrun_command,
)
from bertcourse.distributed.train import main as train_main
from bertcourse.distributed.train import train_data_parallel
from bertcourse.weights import read_weights

STEPS = 6
TIMEOUT = 240


def weights(folder) -> dict[str, torch.Tensor]:
    return read_weights(Path(folder) / "model")


def max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    folder = tmp_path_factory.mktemp("one")
    train_data_parallel(folder, steps=STEPS)
    return folder


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ddp")
    run_job(torchrun_command(2, "bertcourse.distributed.train", ["--out", folder, "--steps", STEPS]), TIMEOUT)
    return folder


def test_ddp_on_two_processes_gives_the_weights_of_one_process_on_the_doubled_batch(one_process, two_processes):
    assert json.loads((two_processes / "result.json").read_text())["world_size"] == 2
    assert max_difference(weights(two_processes), weights(one_process)) < 1e-6
    before = bc.BertForPreTraining(demo_config()).hf_state_dict()  # a different init: the runs did train
    assert max_difference(weights(one_process), before) > 1e-3


def test_gradient_accumulation_gives_the_same_weights(one_process, tmp_path):
    train_data_parallel(tmp_path, steps=STEPS, accumulate=4)
    assert max_difference(weights(tmp_path), weights(one_process)) < 1e-6


def test_accumulation_needs_a_batch_that_splits():
    model = bc.BertForPreTraining(demo_config())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"the batch of 16 rows does not split into `micro_batches`=3"):
        accumulation_step(model, make_dataset(rows=16), optimizer, micro_batches=3)


def test_accelerate_gives_the_weights_of_the_torchrun_script(two_processes, tmp_path):
    command = torchrun_command(2, "bertcourse.distributed.accelerate_train", ["--out", tmp_path, "--steps", STEPS])
    run_job(command, TIMEOUT)
    assert json.loads((tmp_path / "result.json").read_text())["world_size"] == 2
    assert max_difference(weights(tmp_path), weights(two_processes)) < 1e-6


def test_a_worker_that_raises_ends_the_job_with_its_error_and_the_job_resumes_to_the_same_weights(
    two_processes, tmp_path
):
    arguments = ["--out", tmp_path, "--steps", STEPS, "--checkpoint-every", 2]
    started = time.perf_counter()
    with pytest.raises(WorkerError, match=r"rank 1 failed: RuntimeError: injected failure at step 3") as caught:
        run_job(torchrun_command(2, "bertcourse.distributed.train", [*arguments, "--fail-rank", 1, "--fail-step", 3]))
    assert caught.value.rank == 1 and time.perf_counter() - started < 120  # ended, not hung
    assert json.loads((tmp_path / "checkpoint" / "trainer_state.json").read_text())["step"] == 2
    run_job(torchrun_command(2, "bertcourse.distributed.train", [*arguments, "--resume"]), TIMEOUT)
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["first_step"] == 2 and len(result["loss"]) == STEPS
    assert max_difference(weights(tmp_path), weights(two_processes)) < 1e-6


def test_the_launcher_kills_a_hanging_job_and_all_its_children():
    script = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
    script += " print('started', flush=True); time.sleep(60)"
    started = time.perf_counter()
    with pytest.raises(JobTimeout, match=r"did not finish within 3 s; its processes were killed"):
        run_job([sys.executable, "-c", script], timeout=3)
    assert time.perf_counter() - started < 20
    left = subprocess.run(["pgrep", "-f", "time.sleep\\(60\\)"], capture_output=True, text=True).stdout.split()
    assert str(os.getpid()) not in left and not left


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match=r"`nproc`=999 is more processes than this machine's \d+ (CPU cores|GPUs)"):
        torchrun_command(999, "bertcourse.distributed.train")
    with pytest.raises(ValueError, match=r"`global_batch`=33 is not divisible by the world size 2.*try 34"):
        rank_batch(make_dataset(), 0, 33, 0, 2)
    with pytest.raises(ValueError, match=r"`precision` must be one of \['bf16', 'fp16', 'fp32'\], got 'fp8'"):
        train_data_parallel("unused", precision="fp8")
    with pytest.raises(TypeError, match=r"`command` must be a non-empty list of strings"):
        run_job("torchrun train.py")
    with pytest.raises(RuntimeError, match=r"the job exited with code 3"):
        run_job([sys.executable, "-c", "import sys; sys.exit(3)"])


def test_a_visible_gpu_does_not_move_the_course_jobs_off_the_cpu(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a Colab GPU runtime, 1 GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    command = torchrun_command(2, "bertcourse.distributed.train", ["--out", "run"])  # 2 CPU ranks
    assert "--nproc_per_node=2" in command and "cuda" not in command
    with pytest.raises(ValueError, match=r"`nproc`=2 is more processes than this machine's 1 GPUs"):
        torchrun_command(2, "bertcourse.distributed.train", gpus=True)
    assert torchrun_command(1, "bertcourse.distributed.train", gpus=True)[-2:] == ["--device", "cuda"]
    train_main(["--out", str(tmp_path), "--steps", "2", "--global-batch", "8"])  # a CUDA device would fail here
    assert (tmp_path / "result.json").is_file()


def test_a_crash_outside_python_is_quoted_even_when_the_report_is_long():
    crash = "print(\"terminate called after throwing an instance of 'gloo::IoException'\", flush=True);"
    crash += " print('report line ' * 400, flush=True); import os; os.abort()"
    quoted = r"crashed outside Python:\n  terminate called .*gloo::IoException"
    with pytest.raises(RuntimeError, match=quoted) as caught:
        run_job([sys.executable, "-c", crash])
    assert "report line" in str(caught.value)  # the tail is still there


def test_the_sampler_pitfalls():
    data = make_dataset(rows=64)
    rows = [rank_batch(data, 0, 16, rank, 2)["input_ids"] for rank in (0, 1)]
    together = rank_batch(data, 0, 16, 0, 1)["input_ids"]
    assert sorted(map(tuple, torch.cat(rows).tolist())) == sorted(map(tuple, together.tolist()))  # the global batch
    same = [rank_batch(data, 0, 16, rank, 2, sampler=False)["input_ids"] for rank in (0, 1)]
    assert torch.equal(*same)  # without the sampler every rank trains on the same rows
    epochs = [rank_batch(data, step, 16, 0, 2)["input_ids"] for step in (0, 4)]  # 4 steps an epoch
    assert not torch.equal(*epochs)
    frozen = [rank_batch(data, step, 16, 0, 2, set_epoch=False)["input_ids"] for step in (0, 4)]
    assert torch.equal(*frozen)  # set_epoch forgotten: every epoch in the same order


def test_the_global_mean_loss_of_rank_pairs_is_the_whole_batchs_mean_and_the_mean_of_means_is_not():
    from bertcourse.distributed import global_mean_loss

    losses = torch.rand(20, generator=torch.Generator().manual_seed(0)) * 5  # (20,) one loss per masked token
    shares = losses.split([3, 0, 9, 8])  # 4 ranks holding different counts, one none
    sums = torch.stack([share.sum() for share in shares])  # (4,)
    counts = torch.tensor([len(share) for share in shares])  # (4,)
    torch.testing.assert_close(global_mean_loss(sums, counts), losses.mean())
    held = counts > 0
    assert not torch.isclose((sums[held] / counts[held]).mean(), losses.mean())  # DDP's average of the means
    assert global_mean_loss(torch.zeros(2), torch.zeros(2, dtype=torch.long)).isnan()  # no item anywhere
