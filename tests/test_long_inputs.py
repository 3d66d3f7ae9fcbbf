"""bertcourse.long_inputs: windows that cover every token and fall where Hugging Face's do, local attention
equal to masked full attention, block attention equal to PyTorch's SDPA without the n x n matrix, and the
peak memory measured for real; every bad input gets a clear error."""

import pytest
import torch
import torch.nn.functional as F

import bertcourse as bc
from bertcourse import long_inputs as li
from bertcourse.bench import __main__ as bench
from bertcourse.long_inputs.local import longformer_mask
from bertcourse.long_inputs.windows import average_token_outputs
from bertcourse.pretrained import default_weights_dir

TEXT = (
    "Hamlet, Prince of Denmark, meets the ghost of his father on the castle walls at night, and learns that "
    "his uncle Claudius poured poison into the sleeping king's ear. He feigns madness, stages a play to catch "
    "the conscience of the king, and kills Polonius behind a curtain."
)


@pytest.fixture(scope="module")
def tok():
    return bc.WordPieceTokenizer.from_folder(default_weights_dir())


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --- truncation ----------------------------------------------------------------------------------


def test_truncation_keeps_the_head_the_tail_or_both():
    ids = torch.arange(100, 120)
    assert li.truncate(ids, 5, "head").tolist() == [100, 101, 102, 103, 104]
    assert li.truncate(ids, 5, "tail").tolist() == [115, 116, 117, 118, 119]
    assert li.truncate(ids, 5, "head+tail", head_tokens=2).tolist() == [100, 101, 117, 118, 119]
    assert li.truncate(ids, 8, "head+tail").tolist() == [100, 101, *range(114, 120)]  # head 8 // 4 = 2
    assert li.truncate(ids, 6, "head+tail", head_tokens=0).tolist() == list(range(114, 120))
    assert li.truncate(ids, 50, "tail") is ids  # it fits: nothing dropped


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"keep": "middle"}, ValueError, r"`keep` must be one of \('head', 'tail', 'head\+tail'\), got 'middle'"),
        ({"keep": "head+tail", "head_tokens": 9}, ValueError, "`head_tokens` must be an int from 0 to max_tokens=8"),
        ({"max_tokens": 0}, ValueError, "`max_tokens` must be a positive int, got 0"),
    ],
)
def test_truncation_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        li.truncate(torch.arange(20), **{"max_tokens": 8, **kwargs})


def test_truncation_refuses_a_batch_and_floats():
    with pytest.raises(ValueError, match=r"shape \(n_tokens,\)"):
        li.truncate(torch.zeros(2, 5, dtype=torch.long), 3)
    with pytest.raises(TypeError, match="must hold integers"):
        li.truncate(torch.zeros(5), 3)


# --- window spans --------------------------------------------------------------------------------

SETTINGS = [
    (n, window, stride) for n in (1, 7, 10, 11, 64, 65, 301) for window, stride in ((10, 7), (10, 1), (8, 4), (3, 2))
]


@pytest.mark.parametrize(("n", "window", "stride"), SETTINGS)
def test_windows_cover_every_token_move_by_the_stride_and_stop_at_the_end(n, window, stride):
    spans = li.window_spans(n, window, stride)
    starts, ends = spans[:, 0], spans[:, 1]
    assert spans.dtype == torch.long and starts[0] == 0 and ends[-1] == n
    assert torch.equal(starts, torch.arange(len(spans)) * stride)
    assert bool((ends - starts <= window).all()) and bool((ends[:-1] - starts[:-1] == window).all())
    covered = torch.zeros(n, dtype=torch.bool)
    for start, end in spans.tolist():
        covered[start:end] = True
    assert bool(covered.all())
    assert len(spans) == 1 or int(ends[-2]) < n  # no window after the first that reached the end
    if len(spans) > 1:
        assert bool((ends[:-1] - starts[1:] == window - stride).all())  # neighbours overlap by window - stride


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (
            (100, 8, 8),
            ValueError,
            r"`window`=8 must be larger than `stride`=8: .* share window - stride = 0 tokens, so a",
        ),
        ((100, 8, 12), ValueError, r"`stride`=12: .* leave stride - window = 4 tokens between them that no window"),
        ((100, 8, 9), ValueError, r"`stride`=9: .* leave stride - window = 1 token between them that no window"),
        ((100, 8, 0), ValueError, r"`stride` must be at least 1 \(it is how far each window moves"),
        ((100, 8, -2), ValueError, "`stride` must be at least 1"),
        ((100, 8, 2.5), TypeError, "`stride` must be a positive int, got float 2.5"),
        ((100, 0, 1), ValueError, "`window` must be a positive int, got 0"),
        ((0, 8, 4), ValueError, "`n_tokens` must be a positive int, got 0"),
        (
            (1000, 512, 256, 512),
            ValueError,
            r"`window`=512 tokens plus \[CLS\] and \[SEP\] need 514 positions, but the model learned only "
            r"max_position_embeddings=512: use window <= 510",
        ),
    ],
)
def test_window_errors_say_what_is_wrong(args, error, match):
    with pytest.raises(error, match=match):
        li.window_spans(*args)


def test_a_window_of_510_fits_bert():
    assert li.window_spans(1000, 510, 255, max_positions=512).shape == (3, 2)


# --- agreement with Hugging Face ------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_tok():
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(default_weights_dir()))


@pytest.mark.parametrize(("window", "stride"), [(16, 12), (10, 1), (20, 19), (7, 3), (200, 100)])
def test_windows_fall_where_hugging_faces_overflowing_tokens_fall(tok, hf_tok, window, stride):
    ids = li.content_ids(tok, TEXT)
    ours = li.window_batch(ids, li.window_spans(len(ids), window, stride), tok)
    theirs = hf_tok(TEXT, **li.hf_overflow_arguments(window, stride))["input_ids"]
    assert len(theirs) == len(ours["input_ids"])
    for row, mask, their_row in zip(ours["input_ids"], ours["attention_mask"], theirs, strict=True):
        assert row[mask.bool()].tolist() == their_row


def test_hugging_faces_stride_is_the_overlap():
    assert li.hf_overflow_arguments(128, 96) == {
        "max_length": 130,
        "stride": 32,
        "truncation": True,
        "return_overflowing_tokens": True,
    }
    with pytest.raises(ValueError, match="must be larger than `stride`"):
        li.hf_overflow_arguments(32, 32)


# --- the windows as model inputs, and merging ------------------------------------------------------


def test_content_ids_are_the_tokenizers_ids_without_cls_and_sep(tok):
    framed = tok(TEXT)["input_ids"][0]
    assert li.content_ids(tok, TEXT).tolist() == framed[1:-1].tolist()
    long_text = " ".join(["word"] * 700)
    assert li.content_ids(tok, long_text).shape == (700,)  # no truncation at 512
    with pytest.raises(ValueError, match="`text` must be a non-empty string"):
        li.content_ids(tok, "  ")


def test_window_batch_frames_each_window_and_pads(tok):
    ids = torch.arange(1000, 1011)
    batch = li.window_batch(ids, li.window_spans(11, 6, 4), tok)  # windows [0, 6), [4, 10), [8, 11)
    cls_id, sep_id = tok("x")["input_ids"][0][[0, -1]].tolist()
    assert batch["input_ids"].tolist() == [
        [cls_id, 1000, 1001, 1002, 1003, 1004, 1005, sep_id],
        [cls_id, 1004, 1005, 1006, 1007, 1008, 1009, sep_id],
        [cls_id, 1008, 1009, 1010, sep_id, tok.pad_token_id, tok.pad_token_id, tok.pad_token_id],
    ]
    assert batch["attention_mask"].tolist() == [[1] * 8, [1] * 8, [1] * 5 + [0] * 3]
    assert not batch["token_type_ids"].any()
    with pytest.raises(ValueError, match=r"`spans` reach token 12, past the end of `ids` \(11 tokens\)"):
        li.window_batch(ids, torch.tensor([[0, 6], [6, 12]]), tok)


def test_each_token_is_read_from_the_window_where_it_sits_most_centrally():
    spans = li.window_spans(11, 6, 4)  # [0, 6), [4, 10), [8, 11)
    # token 4: context 1 in window 0, 0 in window 1 -> 0; token 5: 0 vs 1 -> 1; token 8: 1 vs 0 -> 1; 9: 0 vs 1 -> 2
    assert li.central_windows(spans).tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    tie = torch.tensor([[0, 4], [1, 5]])  # token 2: context 1 in both windows -> the earlier
    assert li.central_windows(tie)[2] == 0
    with pytest.raises(ValueError, match="`spans` leave 2 tokens in no window \\(the first is token 4\\)"):
        li.central_windows(torch.tensor([[0, 4], [6, 9]]))


@pytest.mark.parametrize(("n", "window", "stride"), [(11, 6, 4), (50, 10, 7), (9, 20, 10)])
def test_merged_token_outputs_come_from_the_right_row_of_the_right_window(n, window, stride):
    spans = li.window_spans(n, window, stride)
    hidden = torch.zeros(len(spans), window + 2, 2)
    for w, (start, end) in enumerate(spans.tolist()):
        hidden[w, 1 : end - start + 1, 0] = torch.arange(start, end).float()  # which token each row holds
        hidden[w, :, 1] = w  # which window
    merged = li.merge_token_outputs(hidden, spans)
    assert merged[:, 0].tolist() == list(range(n))
    assert merged[:, 1].long().tolist() == li.central_windows(spans).tolist()
    with pytest.raises(ValueError, match="`last_hidden_state` must hold"):
        li.merge_token_outputs(hidden[:, :3], spans)


@pytest.mark.parametrize(("n", "window", "stride"), [(11, 6, 4), (50, 10, 7), (9, 20, 10)])
def test_averaged_token_outputs_are_the_mean_of_each_tokens_rows(n, window, stride):
    spans = li.window_spans(n, window, stride)
    hidden = randn(len(spans), window + 3, 4)
    averaged = average_token_outputs(hidden, spans)
    for i in range(n):
        rows = [hidden[w, 1 + i - s] for w, (s, e) in enumerate(spans.tolist()) if s <= i < e]
        torch.testing.assert_close(averaged[i], torch.stack(rows).mean(dim=0))
    with pytest.raises(ValueError, match="`last_hidden_state` must hold"):
        average_token_outputs(hidden[:, :3], spans)
    with pytest.raises(ValueError, match="`spans` leave 2 tokens in no window"):
        average_token_outputs(randn(2, 6, 4), torch.tensor([[0, 4], [6, 9]]))


def test_merged_sentence_embedding_is_the_mean_of_every_real_token_vector():
    hidden = randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    expected = hidden[mask.bool()].mean(dim=0)
    torch.testing.assert_close(li.merge_sentence_embedding(hidden, mask), expected)


def test_one_window_over_a_short_text_is_the_plain_input(tok):
    ids = li.content_ids(tok, TEXT)
    batch = li.window_batch(ids, li.window_spans(len(ids), 510, 255, max_positions=512), tok)
    assert torch.equal(batch["input_ids"], tok(TEXT)["input_ids"])


# --- local attention -----------------------------------------------------------------------------


def test_banded_mask_allows_keys_at_most_width_away():
    mask = li.banded_mask(5, 1)
    assert mask.dtype == torch.bool
    assert mask.int().tolist() == [
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [0, 1, 1, 1, 0],
        [0, 0, 1, 1, 1],
        [0, 0, 0, 1, 1],
    ]
    assert torch.equal(li.banded_mask(4, 0), torch.eye(4, dtype=torch.bool))
    assert li.banded_mask(4, 3).all()


def test_longformer_mask_is_the_local_global_mask_of_each_text_without_padding_keys():
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0]])
    is_global = torch.zeros(2, 7, dtype=torch.bool)
    is_global[0, [0, 1]] = True
    is_global[1, 0] = True
    mask = longformer_mask(attention_mask, is_global, 1)
    assert mask.shape == (2, 7, 7) and mask.dtype == torch.bool
    assert torch.equal(mask[0], li.local_global_mask(7, 1, [0, 1]))
    assert torch.equal(mask[1], li.local_global_mask(7, 1, [0]) & attention_mask[1].bool()[None, :])
    assert torch.equal(longformer_mask(attention_mask.bool(), is_global, 1), mask)
    for kwargs, match in (
        ({"attention_mask": attention_mask[0]}, r"`attention_mask` must be \(batch, seq\)"),
        ({"is_global": is_global.long()}, "`is_global` must be a bool tensor of the shape of `attention_mask`"),
        ({"width": -1}, "`width` must be an int >= 0"),
    ):
        with pytest.raises(ValueError, match=match):
            longformer_mask(**{"attention_mask": attention_mask, "is_global": is_global, "width": 1, **kwargs})


def test_global_tokens_attend_to_everything_and_everything_attends_to_them():
    mask = li.local_global_mask(6, 1, [0, 4])
    assert mask[0].all() and mask[:, 0].all() and mask[4].all() and mask[:, 4].all()
    rest = [1, 2, 3, 5]
    torch.testing.assert_close(mask[rest][:, rest], li.banded_mask(6, 1)[rest][:, rest])
    assert torch.equal(li.local_global_mask(6, 1), li.banded_mask(6, 1))


@pytest.mark.parametrize("block_size", [1, 5, 64, 1000])
@pytest.mark.parametrize(("width", "global_positions"), [(0, []), (3, []), (7, [0]), (20, [0, 13, 99]), (99, [2])])
def test_local_attention_equals_full_attention_under_the_local_global_mask(width, global_positions, block_size):
    q, k, v = randn(2, 3, 100, 8, seed=1), randn(2, 3, 100, 8, seed=2), randn(2, 3, 100, 6, seed=3)
    mask = li.local_global_mask(100, width, global_positions)
    expected, _ = bc.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(li.local_attention(q, k, v, width, global_positions, block_size=block_size), expected)


def test_local_attention_with_a_full_band_is_full_attention():
    q, k, v = randn(1, 2, 37, 16, seed=4), randn(1, 2, 37, 16, seed=5), randn(1, 2, 37, 16, seed=6)
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(li.local_attention(q, k, v, 36), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(li.local_attention(q, k, v, 10_000, block_size=8), expected, atol=1e-5, rtol=1e-5)


def test_local_attention_memory_grows_linearly():
    peaks = []
    for n in (1024, 4096):
        q = k = v = randn(1, 1, n, 16)
        peaks.append(li.peak_memory(lambda q=q, k=k, v=v: li.local_attention(q, k, v, 16, [0])))
    assert 3 < peaks[1] / peaks[0] < 5  # 4 x the tokens, 4 x the memory (not 16 x)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda q: li.local_attention(q, q[..., :5, :], q, 2), ValueError, "must have the same length"),
        (lambda q: li.local_attention(q, q, q[..., :5, :], 2), ValueError, "`v` must have one value per key"),
        (lambda q: li.local_attention(q, q[..., :4], q, 2), ValueError, "`q` and `k` must have the same width d_k"),
        (lambda q: li.local_attention(q, q, q, -1), ValueError, "`width` must be an int >= 0"),
        (lambda q: li.local_attention(q, q, q, 2, block_size=0), ValueError, "`block_size` must be a positive int"),
        (lambda q: li.local_attention(q, q, q, 2, [10]), ValueError, r"`global_positions` \[10\] are outside"),
        (lambda q: li.local_attention(q, q, q, 2, [1, 1]), ValueError, "lists a position twice"),
        (lambda q: li.local_attention(q, q, q, 2, 0), TypeError, "must be a list of ints such as"),
        (lambda q: li.local_global_mask(10, 2.5), ValueError, "`width` must be an int >= 0"),
    ],
)
def test_local_attention_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(randn(2, 10, 8))


# --- block attention ---------------------------------------------------------------------------


@pytest.mark.parametrize("block_size", [1, 7, 64, 128, 500])
def test_block_attention_matches_sdpa(block_size):
    q, k, v = randn(2, 3, 50, 16, seed=1), randn(2, 3, 130, 16, seed=2), randn(2, 3, 130, 8, seed=3)
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(li.block_attention(q, k, v, block_size=block_size), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("block_size", [16, 128])
def test_block_attention_matches_sdpa_with_a_padding_mask(block_size):
    q, k, v = randn(3, 4, 90, 16, seed=1), randn(3, 4, 90, 16, seed=2), randn(3, 4, 90, 16, seed=3)
    mask = bc.expand_padding_mask(bc.padding_mask([90, 33, 1]))  # (3, 1, 1, 90)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    output = li.block_attention(q, k, v, mask, block_size=block_size)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)


def test_a_fully_masked_row_gets_zero_output_as_the_package_rule_says():
    q, k, v = randn(2, 20, 8, seed=1), randn(2, 20, 8, seed=2), randn(2, 20, 8, seed=3)
    mask = torch.ones(20, 20, dtype=torch.bool)
    mask[3] = False  # query 3 may attend to nothing
    output = li.block_attention(q, k, v, mask, block_size=6)
    assert not output.isnan().any() and not output[:, 3].any()
    expected, weights = bc.scaled_dot_product_attention(q, k, v, mask)
    assert not weights[:, 3].any()
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)


def test_block_attention_in_float64_and_bfloat16():
    q, k, v = (randn(1, 2, 40, 8, seed=s, dtype=torch.float64) for s in (1, 2, 3))
    torch.testing.assert_close(li.block_attention(q, k, v, block_size=9), F.scaled_dot_product_attention(q, k, v))
    half = li.block_attention(*(x.bfloat16() for x in (q, k, v)), block_size=9)
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.double(), F.scaled_dot_product_attention(q, k, v), atol=0.05, rtol=0.05)


def test_merging_two_block_states_gives_the_state_of_both():
    scores, v = randn(4, 10, seed=1) * 3, randn(10, 5, seed=2)
    merged = li.merge_softmax_blocks(
        *li.softmax_block_state(scores[:, :6], v[:6]), *li.softmax_block_state(scores[:, 6:], v[6:])
    )
    whole = li.softmax_block_state(scores, v)
    for mine, theirs in zip(merged, whole, strict=True):
        torch.testing.assert_close(mine, theirs)
    torch.testing.assert_close(merged[2] / merged[1], torch.softmax(scores, dim=-1) @ v)


def test_merge_errors():
    m, s, o = torch.zeros(4, 1), torch.ones(4, 1), torch.zeros(4, 3)
    with pytest.raises(ValueError, match=r"`sum_b` must have shape \(..., q_len, 1\) = \(4, 1\)"):
        li.merge_softmax_blocks(m, s, o, m, torch.ones(4), o)
    with pytest.raises(ValueError, match="`out_b` must have the shape of `out_a`"):
        li.merge_softmax_blocks(m, s, o, m, s, torch.zeros(4, 2))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda q: li.block_attention(q, q, q, block_size=0), ValueError, "`block_size` must be a positive int, got 0"),
        (lambda q: li.block_attention(q, q, q, block_size=-3), ValueError, "`block_size` must be a positive int"),
        (lambda q: li.block_attention(q, q[..., :4], q), ValueError, "`q` and `k` must have the same width d_k"),
        (lambda q: li.block_attention(q, q, q[:, :5]), ValueError, "`v` must have one value per key"),
        (lambda q: li.block_attention(q, q[:1], q[:1]), ValueError, "same leading"),
        (lambda q: li.block_attention(q, q, q.double()), TypeError, "`v` has dtype torch.float64 but `q` has"),
        (lambda q: li.block_attention(q, q, q, torch.ones(2, 3, dtype=torch.bool)), ValueError, "cannot broadcast"),
        (lambda q: li.block_attention(q[0, 0], q, q), ValueError, "at least 2 dimensions"),
    ],
)
def test_block_attention_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(randn(2, 10, 8))


# --- memory ------------------------------------------------------------------------------------


def test_peak_memory_sees_a_tensor_and_not_what_existed_before():
    before = torch.empty(1_000_000)  # 4 MB allocated before the call: not counted
    assert li.peak_memory(lambda: torch.empty(250_000)) >= 1_000_000
    assert li.peak_memory(lambda: torch.empty(250_000)) < 1_100_000
    assert li.peak_memory(lambda: None) == 0
    del before


def test_block_attention_peak_memory_is_far_below_the_explicit_matrix():
    n = 4096
    q, k, v = randn(1, 1, n, 32, seed=1), randn(1, 1, n, 32, seed=2), randn(1, 1, n, 32, seed=3)
    explicit = li.peak_memory(lambda: torch.softmax(q @ k.transpose(-2, -1) / 32**0.5, dim=-1) @ v)
    block = li.peak_memory(lambda: li.block_attention(q, k, v, block_size=32))
    assert explicit >= 2 * n * n * 4  # at least two (n, n) fp32 matrices alive at once
    assert explicit >= 10 * block


def test_peak_memory_errors():
    with pytest.raises(TypeError, match="`fn` must be a function of no arguments"):
        li.peak_memory(torch.empty(3))
    with pytest.raises(ValueError, match="`device` must be a CPU or CUDA device, got meta"):
        li.peak_memory(lambda: None, device="meta")


def test_peak_memory_writes_nothing_on_stderr(capfd):
    assert li.peak_memory(lambda: torch.ones(10)) == 40
    captured = capfd.readouterr()  # the file descriptors themselves: the profiler's engine writes from C++
    assert captured.err == ""


# --- the benchmark section -----------------------------------------------------------------------


def test_benchmark_section_reports_time_and_memory_of_the_three_methods(capsys):
    results = bench.main(["--only", "long_inputs", "--lengths", "32,64", "--repeats", "1", "--block-size", "16"])
    rows = results["long_inputs"]
    assert [row["setting"] for row in rows] == ["n=32", "n=64"]
    for row in rows:
        assert all(row[f"{name}_ms"] > 0 and row[f"{name}_mib"] > 0 for name in ("explicit", "sdpa", "block"))
        assert row["memory_ratio"] == row["explicit_mib"] / row["block_mib"]
    report = capsys.readouterr().out.splitlines()
    assert "one head of width 64" in report[0] and "blocks of 16 keys" in report[0]
    assert report[1].strip().startswith("n=32") and report[2].strip().startswith("n=64")
    assert all("peak memory: explicit" in line for line in report[1:])


# --- costs: time, memory and their power laws ----------------------------------------------------


def test_on_one_thread_runs_on_one_thread_and_gives_the_count_back_even_on_an_error():
    threads = torch.get_num_threads()
    assert li.on_one_thread(torch.get_num_threads) == 1
    assert torch.get_num_threads() == threads

    def fails():
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        li.on_one_thread(fails)
    assert torch.get_num_threads() == threads


def test_cpu_seconds_warms_up_once_then_keeps_the_best_of_the_repeats_on_one_thread():
    seen = []
    seconds = li.cpu_seconds(lambda: seen.append(torch.get_num_threads()), repeats=4)
    assert seen == [1] * 5 and isinstance(seconds, float) and seconds >= 0
    with pytest.raises(ValueError, match="`repeats` must be a positive int, got 0"):
        li.cpu_seconds(lambda: None, repeats=0)


def test_measure_costs_gives_one_time_and_one_peak_per_length_for_each_method():
    def explicit(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v  # (1, 1, n, d)

    costs = li.measure_costs({"explicit": explicit, "SDPA": F.scaled_dot_product_attention}, [32, 64], d=8, repeats=1)
    assert list(costs) == ["explicit", "SDPA"]
    seconds, peaks = costs["explicit"]
    assert len(seconds) == len(peaks) == 2 and all(s >= 0 for s in seconds)
    assert peaks[0] >= 32 * 32 * 4 and peaks[1] >= 64 * 64 * 4  # the (n, n) scores, fp32
    with pytest.raises(ValueError, match="`lengths` must be positive ints"):
        li.measure_costs({"SDPA": F.scaled_dot_product_attention}, [0, 64])


def test_loglog_slope_is_the_exponent_of_a_power_law():
    lengths = [256, 512, 1024, 2048]
    assert li.loglog_slope(lengths, [3e-6 * n**2 for n in lengths]) == pytest.approx(2.0)
    assert li.loglog_slope(lengths, [7.0 * n for n in lengths]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one positive value per length"):
        li.loglog_slope(lengths, [1.0, 2.0, 0.0, 4.0])
    with pytest.raises(ValueError, match="two or more lengths"):
        li.loglog_slope([512], [1.0])


def test_cost_slopes_fit_time_and_memory_from_fit_from_on():
    lengths = [128, 512, 1024, 2048]
    costs = {
        "quadratic time, linear memory": ([1.0, float(512**2), float(1024**2), float(2048**2)], [1, 512, 1024, 2048])
    }
    ((time_slope, memory_slope),) = li.cost_slopes(costs, lengths).values()  # 128 is left out of the fit
    assert time_slope == pytest.approx(2.0) and memory_slope == pytest.approx(1.0)
    assert li.cost_slopes(costs, lengths, fit_from=128)["quadratic time, linear memory"][0] > 2.0


def test_plot_costs_draws_time_and_memory_with_the_fitted_slopes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = [256, 512, 1024]
    costs = {"explicit": ([1e-3, 4e-3, 16e-3], [2**18, 2**20, 2**22])}
    figure = li.plot_costs(costs, lengths, "One head")
    left, right = figure.axes
    assert left.get_legend().get_texts()[0].get_text() == "explicit (slope 2.00)"
    assert right.get_legend().get_texts()[0].get_text() == "explicit (slope 2.00)"
    assert list(right.lines[0].get_ydata()) == [0.25, 1.0, 4.0]  # MiB
    assert figure.texts[0].get_text() == "One head; slopes fitted from n = 512"
    plt.close(figure)
