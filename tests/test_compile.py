"""``torch.compile(model, fullgraph=True)`` compiles BertModel's fast path, and the attention and encoder
layers alone, and matches eager.

fullgraph=True turns every graph break into an error, so this test also proves the forward pass
reads no tensor value back to the host (no ``.item()``, no ``bool(mask.all())``) while compiling.
Inductor on the CPU compiles C++ with the system's compiler (gcc); the sizes are tiny so that the
compilation, not the model, is what takes the time.
"""

from __future__ import annotations

import pytest
import torch

import bertcourse as bc

TINY = bc.BertConfig(
    vocab_size=101, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48, type_vocab_size=2
)


@pytest.fixture(autouse=True)
def fresh_compiler():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_fullgraph_compile_of_the_fast_path_matches_eager():
    torch.manual_seed(0)
    model = bc.BertModel(TINY).eval()
    input_ids = torch.randint(0, TINY.vocab_size, (2, 9))  # (batch, seq)
    attention_mask = torch.ones(2, 9, dtype=torch.long)
    attention_mask[1, 6:] = 0  # padding, so the masked path is compiled too
    token_type_ids = torch.zeros_like(input_ids)
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        eager = model(input_ids, attention_mask, token_type_ids)
        fast = compiled(input_ids, attention_mask, token_type_ids)
    torch.testing.assert_close(fast.last_hidden_state, eager.last_hidden_state, atol=1e-5, rtol=0)
    torch.testing.assert_close(fast.pooler_output, eager.pooler_output, atol=1e-5, rtol=0)


def test_multi_head_attention_and_encoder_layer_compiled_by_inductor_match_eager():
    torch.manual_seed(0)
    x = torch.randn(2, 7, 32)
    mask = bc.expand_padding_mask(bc.padding_mask([7, 5]))
    for module in (bc.MultiHeadAttention(32, 4).eval(), bc.EncoderLayer(32, 4, 64).eval()):
        torch._dynamo.reset()
        compiled = torch.compile(module, fullgraph=True)
        with torch.no_grad():
            (ours, _), (expected, _) = compiled(x, mask), module(x, mask)
        torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


def test_value_checks_are_skipped_only_while_compiling():
    model = bc.BertModel(TINY).eval()
    bad = torch.full((1, 4), TINY.vocab_size)  # an id past the vocabulary
    with pytest.raises(ValueError, match=r"`input_ids` contains 101, outside the range 0..100"):
        model(bad)  # eager, on the CPU: checked
