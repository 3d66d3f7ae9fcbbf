r"""Exercise checkers that tell a learner *which* mistake they made.

In a notebook::

    from bertcourse.exercises import check, solution

    def my_layer_norm(x, weight, bias, eps):
        raise NotImplementedError  # the learner's code goes here

    check("layer_norm", my_layer_norm)  # shows: not attempted / correct / wrong, and why
    solution("layer_norm")  # shows the reference source

How a check works:

1. Each exercise builds a few seeded test cases (batched and unbatched, with and without
   masks, odd sizes, fp32) from its own ``torch.Generator``: the global random state of
   the notebook is never touched.
2. The learner's function runs on a copy of every case's inputs; the reference is
   **always the package function of the same name** (one source of truth).
3. ``NotImplementedError`` on the first case means "not attempted yet"; right answers on
   every case mean "correct".
4. Otherwise the output is compared with a catalogue of known mistakes, each a small
   function that implements the wrong variant. A mistake matches when, on every case,
   it gives the learner's output or fails the same way (a forgotten transpose raises a
   shape error on non-square inputs, so the cases include a square one where it runs),
   with at least one equal output. The first match names the mistake and hints at the
   fix; the cases are built so that each mistake differs from the reference and from
   every other mistake. With no match, the first failing case is reported: an
   exception, a wrong type, shape or dtype, NaN, or the largest difference.

The cases, the reference outputs and the mistakes' outputs are computed once per
exercise and cached: they are seeded, so they never change.

A checker never raises, whatever the learner's function does or returns; only an unknown
exercise name raises (``ValueError``), since that is the notebook author's error. Every
message is deterministic (no timings, ids or paths), because nbval compares the output
of every committed notebook cell.

The subpackage, in reading order:

records        what the learner sees (CheckResult, Listing) and what an exercise is made of
engine         how a check runs: calls, matching against the mistakes, the problem messages
registry       every exercise by name, in course order; ``check``, ``solution``, ``prompt``
random_inputs  the seeded random tensors that several catalogue modules draw

The catalogue, one module per notebook. Each exercise there comes as its cases, its mistakes
(each the wrong code a learner writes, kept as small as possible) and the ``Exercise`` that
ties them to the package function of the same name:

attention      01-02: qkv_projection, attention_scores, scaled_dot_product_attention
masks          03: padding_mask, causal_mask
positional     04: sinusoidal_position_encoding
multihead      05: split_heads, merge_heads, multi_head_attention
layernorm_ffn  06: layer_norm, feed_forward
bert           07: bert_embeddings, count_parameters
"""

from .records import CheckResult, Exercise, Mistake
from .registry import EXERCISES, check, progress, prompt, solution

__all__ = ["EXERCISES", "CheckResult", "Exercise", "Mistake", "check", "progress", "prompt", "solution"]
