"""The capstone's package: the reference pieces assembled match Hugging Face within 1e-5; a known-wrong piece
is named at its step with its check's diagnosis (a piece that raises inside another is named itself); start() never
overwrites; first_difference is the step the report names; the classifier of the pieces gets the reference's
gradients; bad input gets clear errors."""

import os

import pytest
import torch
import transformers

import bertcourse as bc
from bertcourse.bench.timing import alternating_medians
from bertcourse.capstone import (
    PIECES,
    MeanPooledClassifier,
    MistakeExplorer,
    assemble,
    classifier_pair,
    compare,
    first_difference,
    hugging_face_steps,
    load_pieces,
    mistake_options,
    relative_error_by_layer,
    skeleton,
    start,
)
from bertcourse.encoder import pre_ln_layer
from bertcourse.pretrained import default_weights_dir


@pytest.fixture(scope="module")
def setting():
    _, tokenizer = bc.load_pretrained()
    batch = tokenizer(["The cat sat on the mat.", "A dog."], ["It slept.", "It barked at the cat all night."])
    assert batch["input_ids"].shape[1] != 12 and bool((batch["token_type_ids"] == 1).any())  # 12: MiniLM's heads
    hf = transformers.BertModel.from_pretrained(default_weights_dir(), attn_implementation="eager").eval()
    return hf, batch


def test_reference_pieces_match_hugging_face_within_1e_5(setting):
    report = compare(load_pieces(), *setting)
    assert report.matches and report.difference < 1e-5, report.text


def _sdpa_by_d_k(q, k, v, mask=None, *, need_weights=True, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(q.dtype).min)
    weights = scores.softmax(-1)
    return weights @ v, weights


def _split_without_transpose(x, num_heads):
    batch, seq, d_model = x.shape
    return x.reshape(batch, num_heads, seq, d_model // num_heads)


def _layer_norm_unbiased(x, weight, bias, eps=1e-12):
    return weight * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) + bias


def _ffn_relu(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2


def _post_ln_as_pre_ln(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    return pre_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps)


def _embeddings_without_positions(
    ids, types, words, positions, segments, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    return torch.nn.functional.layer_norm(words[ids] + segments[types], words.shape[-1:], ln_weight, ln_bias, eps)


WRONG = [
    ("scaled_dot_product_attention", _sdpa_by_d_k, "layer 0: attention", "scaling by d_k"),
    ("split_heads", _split_without_transpose, "layer 0: heads split (q)", "a plain view"),
    ("layer_norm", _layer_norm_unbiased, "embeddings: LayerNorm", "the unbiased variance"),
    ("feed_forward", _ffn_relu, "layer 0: feed-forward", "ReLU instead of GELU"),
    ("post_ln_layer", _post_ln_as_pre_ln, "layer 0: what post_ln_layer gives the attention", "the Pre-LN layout"),
    ("bert_embeddings", _embeddings_without_positions, "embeddings", "no position embeddings"),
]


def _wrong(piece, function_name):
    from bertcourse.exercises import EXERCISES

    return next(m.wrong for m in EXERCISES[piece].mistakes if m.wrong.__name__ == function_name)


# Mistakes after which a later step raises (a shape W_O or the mask cannot take): the report names the earlier step.
WRONG += [
    (
        "scaled_dot_product_attention",
        _wrong("scaled_dot_product_attention", "_sdpa_outputs_swapped"),
        "layer 0: attention",
        "the outputs in the wrong order",
    ),
    ("split_heads", _wrong("split_heads", "_split_sequence_axis"), "layer 0: heads split (q)", "the sequence axis"),
    ("merge_heads", _wrong("merge_heads", "_merge_heads_summed"), "layer 0: heads merged", "summed"),
]


@pytest.mark.parametrize(("piece", "wrong", "step", "mistake"), WRONG, ids=[f"{w[0]}:{w[1].__name__}" for w in WRONG])
def test_a_wrong_piece_is_named_at_its_step(setting, piece, wrong, step, mistake):
    report = compare(load_pieces({piece: wrong}), *setting)
    assert (report.step, report.piece) == (step, piece), report.text
    assert mistake in report.text, report.text


def _embeddings_without_segments(
    ids, types, words, positions, segments, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    x = words[ids] + positions[: ids.shape[1]]  # (batch, seq, hidden): the segment rows left out
    return torch.nn.functional.layer_norm(x, words.shape[-1:], ln_weight, ln_bias, eps)


def _merge_heads_axes_confused(x):
    batch, heads, seq, d_head = x.shape
    return x.reshape(batch, seq, heads * d_head)  # the head axis read as the sequence axis: no transpose


def _hf_to_ours_layer_norms_swapped(key, prefixed=False):
    name = bc.weights.hf_to_ours(key, prefixed)
    if name is None:
        return None
    for first, second in (("attention_norm", "output_norm"),):
        if first in name:
            return name.replace(first, second)
        if second in name:
            return name.replace(second, first)
    return name


@pytest.mark.parametrize(
    ("piece", "wrong", "step"),
    [
        ("bert_embeddings", _embeddings_without_segments, "embeddings"),
        ("merge_heads", _merge_heads_axes_confused, "layer 0: heads merged"),
        ("hf_to_ours", _hf_to_ours_layer_norms_swapped, "weights renamed"),
    ],
)
def test_mistakes_the_old_batch_hid_are_named(setting, piece, wrong, step):
    report = compare(load_pieces({piece: wrong}), *setting)
    assert (report.step, report.piece) == (step, piece), report.text


def test_swapped_layer_norms_are_named_in_the_weights(setting):
    text = compare(load_pieces({"hf_to_ours": _hf_to_ours_layer_norms_swapped}), *setting).text
    assert "First difference: weights renamed. every key loads (the shapes fit), but `encoder.layers.0." in text, text
    assert "attention.output.LayerNorm" in text and "It is your `hf_to_ours`" in text, text


def _write(folder, functions: str):
    path = folder / "my_bert.py"
    path.write_text(skeleton() + "\n" + functions)  # later definitions replace the skeleton's
    return path


def test_a_wrong_layer_norm_inside_the_learners_embeddings_is_named_layer_norm(setting, tmp_path):
    path = _write(
        tmp_path,
        """
def layer_norm(x, weight, bias, eps=1e-12):
    return weight * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) + bias


def bert_embeddings(ids, types, words, positions, segments, ln_weight, ln_bias, eps=1e-12, position_ids=None):
    if position_ids is None:
        position_ids = torch.arange(ids.shape[1]).expand_as(ids)
    return layer_norm(words[ids] + positions[position_ids] + segments[types], ln_weight, ln_bias, eps)
""",
    )
    pieces = load_pieces(path, record=False)
    assert {"layer_norm", "bert_embeddings"} <= pieces.mine
    report = compare(pieces, *setting)
    assert (report.step, report.piece) == ("embeddings: LayerNorm", "layer_norm"), report.text


def test_a_written_piece_that_calls_an_unwritten_one_runs_with_the_reference_there(setting, tmp_path):
    path = _write(
        tmp_path,
        """
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(attention_scores(q, k) / math.sqrt(q.shape[-1]), mask)
    return weights @ v, weights
""",
    )
    pieces = load_pieces(path, record=False)
    assert pieces.mine == {"scaled_dot_product_attention"}
    assert pieces.verdicts["scaled_dot_product_attention"].passed
    assert pieces.borrowed == {"scaled_dot_product_attention": ("attention_scores", "masked_softmax")}
    assert "it calls `attention_scores`, `masked_softmax`, not written yet" in pieces.table().text
    assert compare(pieces, *setting).matches


def test_each_piece_is_checked_alone_and_my_prefixed_answers_count(tmp_path):
    path = _write(
        tmp_path,
        """
def my_layer_norm(x, weight, bias, eps=1e-12):
    return weight * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) + bias


def post_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = layer_norm(x + attention(x), ln1_weight, ln1_bias, eps)
    return bc.layer_norm(h + feed_forward(h), ln2_weight, ln2_bias, eps)
""",
    )
    pieces = load_pieces(path, record=False)
    assert pieces.mine == {"layer_norm", "post_ln_layer"}  # my_layer_norm, pasted as notebook 06 named it
    assert not pieces.verdicts["layer_norm"].passed and pieces.verdicts["post_ln_layer"].passed  # bc: imported


def test_a_file_that_does_not_import_says_where_in_one_line(tmp_path):
    path = _write(tmp_path, "def split_heads(x, num_heads):\n    return x.view(\n")
    pieces = load_pieces(path, record=False)
    assert not pieces.mine and pieces.problem.startswith("my_bert.py, line "), pieces.problem
    assert "does not import: SyntaxError" in pieces.problem and "\n" not in pieces.problem
    assert pieces.table().text.startswith(pieces.problem + "\nUntil it imports, every piece is the package's")
    (tmp_path / "my_bert.py").write_text("import torch\nraise RuntimeError('oops')\n")
    assert load_pieces(tmp_path / "my_bert.py", record=False).problem == (
        "my_bert.py, line 2 does not import: RuntimeError: oops"
    )


def _masked_softmax_nan_on_empty_rows(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # a row with every key masked: NaN, not zeros
    return scores.softmax(-1)


def test_a_piece_wrong_only_off_this_batch_is_reported_when_every_step_matches(setting):
    report = compare(load_pieces({"masked_softmax": _masked_softmax_nan_on_empty_rows}), *setting)
    assert report.matches, report.text
    assert "But your `masked_softmax` fails its own check, which tries inputs (and gradients) this batch" in (
        report.text
    )


def test_start_writes_the_skeleton_once_and_never_overwrites(tmp_path):
    first = start(tmp_path)
    assert first.created and first.path.read_text() == skeleton()
    first.path.write_text("# mine\n")
    second = start(tmp_path)
    assert not second.created and first.path.read_text() == "# mine\n"
    assert repr(first) == repr(second)  # the notebook's output is the same either way
    assert [p.name for p in tmp_path.iterdir()] == ["my_bert.py"]


def test_the_skeleton_is_the_reference_everywhere(tmp_path):
    pieces = load_pieces(start(tmp_path).path)
    assert not pieces.mine


def test_bad_input_gets_clear_errors(tmp_path):
    with pytest.raises(TypeError, match="`folder` must be a folder path"):
        start(3)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        start(tmp_path / "missing")
    with pytest.raises(ValueError, match="unknown pieces"):
        load_pieces({"attention": print})
    with pytest.raises(TypeError, match="must be a function"):
        load_pieces({"layer_norm": 3})
    with pytest.raises(FileNotFoundError, match="start\\(\\)"):
        load_pieces(tmp_path / "my_bert.py")


def test_a_difference_below_tolerance_that_grows_sends_the_learner_upstream(setting):
    report = compare(load_pieces({"post_ln_layer": _wrong("post_ln_layer", "_post_default_eps")}), *setting)
    assert report.piece not in {"post_ln_layer", None} and report.piece not in load_pieces().mine, report.text
    assert "Look at your pieces that ran before it: `post_ln_layer`." in report.text, report.text
    assert "within tolerance." in report.text


# --- a piece that raises inside another ---------------------------------------------------------


def _sdpa_that_raises(q, k, v, mask=None):
    raise IndexError("my own bug")


def test_a_piece_that_raises_inside_post_ln_layer_is_named_itself(setting):
    report = compare(load_pieces({"scaled_dot_product_attention": _sdpa_that_raises}), *setting)
    assert (report.step, report.piece) == ("layer 0: attention", "scaled_dot_product_attention"), report.text
    assert "IndexError: my own bug" in report.text


# --- first_difference and relative_error_by_layer -----------------------------------------------


def test_first_difference_is_the_step_the_report_names(setting):
    hf, batch = setting
    pieces = load_pieces({"feed_forward": _ffn_relu})
    model = assemble(pieces)
    model.recorder.steps = {}
    with torch.no_grad():
        model(**batch)
    ours, model.recorder.steps = model.recorder.steps, None
    theirs = hugging_face_steps(hf, batch)
    assert first_difference(ours, theirs) == compare(pieces, hf, batch).step == "layer 0: feed-forward"
    assert first_difference(theirs, theirs) is None


def test_first_difference_catches_nan_missing_steps_and_shapes():
    theirs = {"a": torch.ones(2, 3), "b": (torch.zeros(2), torch.ones(2))}
    assert first_difference({"a": torch.ones(2, 3), "b": (torch.zeros(2), torch.ones(2))}, theirs) is None
    assert first_difference({"a": torch.full((2, 3), float("nan")), "b": theirs["b"]}, theirs) == "a"
    assert first_difference({"a": torch.ones(2, 3)}, theirs) == "b"
    assert first_difference({"a": torch.ones(1, 3), "b": theirs["b"]}, theirs) == "a"
    assert first_difference({"a": "not a tensor", "b": theirs["b"]}, theirs) == "a"
    assert first_difference({"a": torch.ones(2, 3) * 1.5, "b": theirs["b"]}, theirs, atol=0.0, rtol=0.5) is None


def test_first_difference_and_relative_error_reject_bad_input():
    with pytest.raises(TypeError, match="`ours` must be a dict"):
        first_difference([torch.ones(1)], {})
    with pytest.raises(TypeError, match=r"`theirs\['a'\]` must be a tensor"):
        first_difference({}, {"a": 3})
    with pytest.raises(ValueError, match="`atol` must be a number >= 0, got -1"):
        first_difference({}, {}, atol=-1)
    with pytest.raises(ValueError, match="`ours` has 2 layers and `theirs` 1"):
        relative_error_by_layer((torch.ones(2), torch.ones(2)), (torch.ones(2),))
    with pytest.raises(ValueError, match=r"layer 0: `ours` has shape \(2,\), `theirs` \(3,\)"):
        relative_error_by_layer((torch.ones(2),), (torch.ones(3),))
    with pytest.raises(TypeError, match="`theirs` must be a non-empty tuple of tensors"):
        relative_error_by_layer((torch.ones(2),), ())


def test_relative_error_by_layer_is_the_norm_ratio_per_layer():
    theirs = (torch.tensor([3.0, 4.0]), torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    ours = (torch.tensor([3.0, 4.5]), torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
    torch.testing.assert_close(relative_error_by_layer(ours, theirs), torch.tensor([0.1, 2.0]))


# --- the classifier trained through the pieces ----------------------------------------------------


def test_classifier_pair_starts_equal_and_its_gradients_are_the_references(setting):
    _, batch = setting
    yours, reference = classifier_pair(load_pieces(), trainable_layers=(5,))
    labels = torch.tensor([1, 0])
    trainable = sorted(name for name, p in yours.named_parameters() if p.requires_grad)
    assert trainable == sorted(name for name, p in reference.named_parameters() if p.requires_grad)
    assert all(name.startswith(("bert.encoder.layers.5.", "classifier.")) for name in trainable) and trainable
    assert not bool(yours.classifier.weight.any())  # the head starts at zero
    yours.train(), reference.train()
    for model in (yours, reference):
        model(**batch, labels=labels).loss.backward()
    with torch.no_grad():
        theirs = dict(reference.named_parameters())
        for name, parameter in yours.named_parameters():
            if parameter.requires_grad:
                torch.testing.assert_close(parameter.grad, theirs[name].grad, atol=1e-6, rtol=1e-4)
    assert float(yours.bert.encoder.layers[5].feed_forward.output.weight.grad.abs().max()) == 0.0  # head at zero
    yours.classifier.weight.data.normal_()
    reference.classifier.weight.data.copy_(yours.classifier.weight.data)
    for model in (yours, reference):
        model.zero_grad()
        model(**batch, labels=labels).loss.backward()
    torch.testing.assert_close(
        yours.bert.encoder.layers[5].attention.query.weight.grad,
        reference.bert.encoder.layers[5].attention.query.weight.grad,
        atol=1e-6,
        rtol=1e-4,
    )
    assert float(yours.bert.encoder.layers[5].attention.query.weight.grad.abs().max()) > 0


def test_classifier_bad_input_gets_clear_errors():
    with pytest.raises(TypeError, match="`pieces` must come from `load_pieces"):
        classifier_pair({"layer_norm": print})
    with pytest.raises(TypeError, match="`encoder` must be a BertModel"):
        MeanPooledClassifier(torch.nn.Linear(2, 2))
    encoder = bc.BertModel(
        bc.BertConfig(hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=8)
    )
    with pytest.raises(ValueError, match=r"`trainable_layers` must hold layer numbers 0..1, got \(2,\)"):
        MeanPooledClassifier(encoder, trainable_layers=(2,))


# --- timing ----------------------------------------------------------------------------------------


def test_alternating_medians_runs_each_in_turn_and_takes_medians():
    calls = []
    medians = alternating_medians({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3, warmup=1)
    assert calls == ["a", "b"] * 4
    assert set(medians) == {"a", "b"} and all(value >= 0 for value in medians.values())


def test_a_piece_tried_in_place_is_checked_but_not_recorded(tmp_path, monkeypatch):
    from bertcourse.exercises import registry

    verdicts = tmp_path / "verdicts.jsonl"
    monkeypatch.setenv(registry.VERDICTS_FILE_VARIABLE, str(verdicts))
    monkeypatch.setattr(registry, "RESULTS", {})
    mine = load_pieces({"layer_norm": _layer_norm_unbiased})  # the learner's file: recorded
    tried = mine.replaced(feed_forward=_ffn_relu)
    assert set(registry.RESULTS) == {"layer_norm"} and verdicts.read_text().count("\n") == 1
    assert tried.mine == {"layer_norm", "feed_forward"} and "ReLU" in tried.verdicts["feed_forward"].message
    assert tried["layer_norm"] is _layer_norm_unbiased and tried["feed_forward"] is _ffn_relu
    assert os.environ[registry.VERDICTS_FILE_VARIABLE] == str(verdicts)


# --- the explorer ----------------------------------------------------------------------------------


def test_the_explorer_puts_any_catalogued_mistake_in_place(setting):
    from bertcourse.exercises import EXERCISES

    options = [value for _, value in mistake_options()]
    assert len(options) == sum(len(EXERCISES[name].mistakes) for name in PIECES if name != "mlm_head")
    assert len(mistake_options(pretraining=True)) == len(options) + len(EXERCISES["mlm_head"].mistakes)
    explorer = MistakeExplorer(load_pieces(), *setting)
    assert explorer.drawn["piece"] == "scaled_dot_product_attention" and explorer.drawn["report"].step
    relu = next(i for i, m in enumerate(EXERCISES["feed_forward"].mistakes) if m.wrong.__name__ == "_ffn_relu")
    explorer.piece.value = "feed_forward"  # the second menu now lists its mistakes, and draws the first
    assert explorer.drawn["piece"] == "feed_forward" and explorer.mistake.value == ("feed_forward", 0)
    assert [value[0] for _, value in explorer.mistake.options] == ["feed_forward"] * len(
        EXERCISES["feed_forward"].mistakes
    )
    explorer.mistake.value = ("feed_forward", relu)
    report = explorer.drawn["report"]
    assert (report.step, report.piece) == ("layer 0: feed-forward", "feed_forward"), report.text
    assert "ReLU instead of GELU" in report.text and "ReLU instead of GELU" in explorer.drawn["text"]
    with pytest.raises(ValueError, match="`start` must be"):
        MistakeExplorer(load_pieces(), *setting, start=("feed_forward", 99))


def test_the_explorer_says_why_a_mistake_changes_nothing_on_its_batch(setting):
    from bertcourse.exercises import EXERCISES

    explorer = MistakeExplorer(load_pieces(), *setting)
    cases = {
        "masked_softmax": "fp16 or bf16",
        "scaled_dot_product_attention": "d_v = d_k",
        "hf_to_ours": "not in this checkpoint",
    }
    for piece, why in cases.items():
        index = next(
            i
            for i, mistake in enumerate(EXERCISES[piece].mistakes)
            if ("fill" in mistake.name or "d_v" in mistake.name or "`bert.` prefix kept" in mistake.name)
        )
        explorer.piece.value = piece
        explorer.mistake.value = (piece, index)
        drawn = explorer.drawn
        assert drawn["report"].matches, drawn["text"]
        assert "changes nothing on this batch" in drawn["text"] and why in drawn["text"], drawn["text"]
        assert "catches it" in drawn["text"] and "Wrong" in drawn["text"]


def test_the_report_keeps_how_much_of_the_tolerance_each_step_uses(setting):
    report = compare(load_pieces(), *setting)
    assert [step for step, _ in report.used] == list(report.matched)
    assert 0 < report.worst_matched < 1
    wrong = compare(load_pieces().replaced(feed_forward=_ffn_relu), *setting)
    ratios = dict(wrong.used)
    assert ratios[wrong.step] > 1 and all(ratios[step] <= 1 for step in wrong.matched)


def test_a_scratch_file_loaded_without_recording_leaves_no_verdict(tmp_path, monkeypatch):
    from bertcourse.exercises import registry

    monkeypatch.setattr(registry, "RESULTS", {})
    scratch = tmp_path / "scratch_bert.py"
    body = "    b, s, h = x.shape\n    return x.reshape(b, num_heads, s, -1)\n"
    scratch.write_text("def split_heads(x, num_heads):\n" + body)
    tried = load_pieces(scratch, record=False)
    assert tried.mine == {"split_heads"} and not tried.verdicts["split_heads"].passed
    assert registry.RESULTS == {}
