"""Every benchmark section runs end to end on tiny sizes and reports what it timed (speed is measured, not asserted)."""

import pytest
import torch

from bertcourse.bench import __main__ as bench


def test_forward_reports_both_settings_against_the_right_implementations(capsys):
    results = bench.main(["--only", "forward", "--batch", "1", "--seq", "8", "--repeats", "1"])["forward"]
    assert [r["setting"] for r in results] == ["fast path", "attention maps"]
    assert all(r["ours_ms"] > 0 and r["theirs_ms"] > 0 for r in results)
    captured = capsys.readouterr()
    assert "Loading weights" not in captured.err, "transformers' progress bars are silenced"
    report = captured.out.splitlines()
    assert "batch 1 x 8 tokens" in report[0]
    for line, result, implementation in zip(report[1:], results, ("sdpa", "eager"), strict=True):
        assert line.strip().startswith(result["setting"])
        assert f"Hugging Face ({implementation})" in line  # the fused kernel vs ours, the maps vs ours
        assert line.endswith(f"ratio={result['ratio']:.2f} (ours / theirs in time, lower is better)")


def test_counts_agree_with_their_nouns(capsys):
    threads = torch.get_num_threads()
    try:
        bench.main(["--only", "forward", "--batch", "1", "--seq", "1", "--repeats", "1", "--threads", "1"])
    finally:
        torch.set_num_threads(threads)  # --threads sets it for the whole process
    header = capsys.readouterr().out.splitlines()[0]
    assert "batch 1 x 1 token, " in header and " 1 thread, " in header and "medians of 1 alternating run" in header
    assert "1 runs" not in header


def test_training_step_reports_its_ratio(capsys):
    (result,) = bench.main(["--only", "training", "--batch", "1", "--seq", "8", "--repeats", "1"])["training"]
    assert result["setting"] == "training step" and result["ours_ms"] > 0 and result["theirs_ms"] > 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.endswith(f"ratio={result['ratio']:.2f} (ours / theirs in time, lower is better)")


def test_the_compiled_pretraining_step_is_timed_with_its_compiling_step(capsys, monkeypatch):
    compiled, real_compile = [], torch.compile

    def quick_compile(model):  # Inductor takes minutes on the tiny BERT: the bookkeeping is what is tested here
        compiled.append(model)
        return real_compile(model, backend="eager")

    monkeypatch.setattr(torch, "compile", quick_compile)
    arguments = ["--only", "pretraining", "--pretraining-batch", "2", "--pretraining-seq", "8", "--repeats", "1"]
    step, with_compile = bench.main([*arguments, "--pretraining-compile"])["pretraining"]
    assert step["setting"] == "pretraining step" and with_compile["setting"] == "pretraining step, torch.compile"
    assert with_compile["compile_s"] > 0 and with_compile["ours_ms"] > 0 and with_compile["theirs_ms"] > 0
    assert len(compiled) == 1
    line = capsys.readouterr().out.splitlines()[-1]
    assert "torch.compile" in line and "the first step (compiling) took" in line
    assert len(bench.main(arguments)["pretraining"]) == 1  # off by default


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--repeats", "0"])
    assert "--repeats must be at least 1" in capsys.readouterr().err
