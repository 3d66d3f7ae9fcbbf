"""The benchmark runs end to end and reports both settings (speed itself is measured, not asserted)."""

from bertcourse import bench


def test_benchmark_reports_both_settings_with_ratios(capsys):
    results = bench.main(["--batch", "1", "--seq", "8", "--repeats", "1"])
    assert [r["setting"] for r in results] == ["fast path", "attention maps"]
    for r in results:
        assert r["ours_ms"] > 0 and r["theirs_ms"] > 0
        assert abs(r["ratio"] - r["ours_ms"] / r["theirs_ms"]) < 1e-9
    assert "batch 1 x 8 tokens" in capsys.readouterr().out
