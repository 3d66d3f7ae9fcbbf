"""The benchmark runs end to end and reports both settings (speed itself is measured, not asserted)."""

from bertcourse import bench


def test_benchmark_reports_both_settings_against_the_right_implementations(capsys):
    results = bench.main(["--batch", "1", "--seq", "8", "--repeats", "1"])
    assert [r["setting"] for r in results] == ["fast path", "attention maps"]
    assert all(r["ours_ms"] > 0 and r["theirs_ms"] > 0 for r in results)
    report = capsys.readouterr().out.splitlines()
    assert "batch 1 x 8 tokens" in report[0]
    for line, result, implementation in zip(report[1:], results, ("sdpa", "eager"), strict=True):
        assert line.strip().startswith(result["setting"])
        assert f"Hugging Face ({implementation})" in line  # the fused kernel vs ours, the maps vs ours
        assert line.endswith(f"ratio={result['ratio']:.2f}")
