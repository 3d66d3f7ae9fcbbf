r"""Exercise checkers that tell a learner *which* mistake they made.

In a notebook::

    from bertcourse.exercises import check, progress, solution

    def my_layer_norm(x, weight, bias, eps=1e-12):
        raise NotImplementedError  # the learner's code goes here

    check("layer_norm", my_layer_norm)  # shows: not attempted / correct / wrong, and why
    solution("layer_norm")  # shows the reference's core: the formula, without argument checks
    progress()  # every exercise checked in this session, with its latest verdict

For an instructor: ``python -m bertcourse.exercises grade PATH...`` runs learners' notebooks in
fresh kernels and prints one row per notebook and exercise (``grading``). It runs their code: use a
sandbox.

How a check works:

1. Each exercise builds seeded test cases from its own ``torch.Generator``, tagged by what they
   test (batched or not, masked or not, a fully masked row, float16 or bfloat16, square or not,
   an optional argument left out), so that each common mistake shows in some case.
2. The learner's function runs on a copy of every case's inputs, in a fixed state (float32 by
   default, the CPU, gradients on, seeded generators, one thread), in a worker thread, within a time
   limit that no ``except`` clause of theirs can swallow, and its output is made plain: a tensor
   subclass or an object with its own comparisons cannot judge itself. The notebook's own state is
   given back untouched. The reference is **always a package function** (one source of truth).
   Values are compared within the exercise's tolerance, widened to the rounding of each case's
   inputs in their dtype.
3. The skeleton's own ``raise NotImplementedError`` on the first case means "not attempted yet" (one
   that PyTorch raises, ``"bitwise_or_cpu" not implemented for 'Float'``, is an attempt); right
   answers on every case (right values, shape, dtype and device) mean "correct", unless the function
   is, or calls, the package's own code for the exercise (its reference, core and helpers, or the
   module class of the same name): that is said, and never judged correct. Other exercises'
   package functions are free to call.
4. Otherwise the outcome is compared with a catalogue of known mistakes, each a small function
   that implements the wrong variant. A mistake matches when, on every case, it gives the
   learner's output or fails the same *kind* of way (a shape error, ``if mask:`` on a tensor, a
   constant that overflows float16), with at least one equal output. The first match names the
   mistake and hints at the fix.
5. With no single mistake, the exercise's knobs (the parts of its formula, each with its usual
   slips) are tried two at a time, so that two slips at once are named too.
6. With no match at all, the first failing case is reported with what can be said about it: which
   output, which kind of case fails and which passes (a kind is named only when a pair of cases
   varies it alone, so that it cannot fail by coincidence), and how the values relate to the right
   ones (a constant factor, a sign, a transpose, the heads in another order, dropout, a few rows) or,
   for an exception, the learner's line, their tensors' shapes and a hint.

The cases, the reference outputs and the mistakes' outputs are computed once per exercise and
cached: they are seeded, so they never change. A checker never raises, hangs or prints, whatever
the learner's function does or returns; only an unknown exercise name raises (``ValueError``),
since that is the notebook author's error. Every message is deterministic (no timings, ids or
paths), because nbval compares the output of every committed notebook cell.

The subpackage, in reading order:

records        what the learner sees (CheckResult, Listing) and what an exercise is made of
sandbox        where the learner's function runs: the fixed state, the time limit, plain values, and
               which of the package's own functions it reached
diagnosis      the words for what is wrong when no catalogued mistake explains it
engine         how a check runs: the cases, matching mistakes and knob combinations, the message
registry       every exercise by name, in course order; ``check``, ``solution``, ``prompt``, ``progress``
gradients      a build piece's gradients against the reference's, once its values are right
build          ``use``: the learner's piece checked and run by the cells below it, or the reference
grading        ``python -m bertcourse.exercises grade``: learners' notebooks in fresh kernels
random_inputs  the seeded random tensors that several catalogue modules draw

The catalogue, one module per part of the course. Each exercise there comes as its cases, its
mistakes (each the wrong code a learner writes, kept as small as possible) and the ``Exercise``
that ties them to its package function:

attention      01-02: qkv_projection, qkv_from_linear, linear_scores, attention_scores,
               scaled_dot_product_attention, flexible_attention, stable_softmax
masks          03: padding_mask, causal_mask, masked_softmax, key_padding_mask, mask_from_torch
positional     04: sinusoidal_position_encoding, sinusoidal_positions, alibi_bias
multihead      05: split_heads, merge_heads, split_fused_qkv, multi_head_attention, torch_multi_head_attention
layernorm_ffn  06: layer_norm, feed_forward, post_ln_layer, pre_ln_layer, parallel_layer, pre_ln_stack
bert           04: bert_embeddings; 07: mlm_head, hf_to_ours, count_parameters
inside, pretraining, finetuning, long_inputs, precision   08-12, the later parts
"""

from .build import use
from .records import CheckResult, Exercise, Knob, Mistake
from .registry import EXERCISES, check, progress, prompt, solution

__all__ = [
    "EXERCISES",
    "CheckResult",
    "Exercise",
    "Knob",
    "Mistake",
    "check",
    "progress",
    "prompt",
    "solution",
    "use",
]
