"""Interactive explorers: move a slider, see attention change.

    ScalingExplorer()                        why softmax(QK^T / sqrt(d_k)): entropy and gradients as d_k grows (02)
    MaskingExplorer()                        padding and causal masks on a batch of three sentences (03)
    PositionalEncodingExplorer()             the sinusoidal table, one position and one dimension at a time (04)
    ResidualExplorer()                       the gradient reaching each layer of a deep stack, residuals on or off (06)
    AttentionExplorer(model, tokenizer)      the attention maps of a real BERT, layer by layer, head by head (07)
    ModelViewExplorer(model, tokenizer)      every head of every layer at once, one enlarged (08)
    NeuronViewExplorer(model, tokenizer)     the query and key vectors behind one attention weight (08)
    FillMaskExplorer(model, tokenizer)       a tiny pretrained BERT's top-5 guesses for each [MASK] you type (09)
    MLMMaskingExplorer(tokenizer)            what the model sees of a sentence under the 80/10/10 rule, per seed (09)
    SaliencyExplorer(model, tokenizer)       a review's predicted probability, and the tokens that push it (10)
    WindowExplorer(tokenizer)                sliding windows over a text: what each covers, where tokens are read (11)
    NumberFormatExplorer()                   a number as fp32, fp16 and bf16 store it: neighbours, error, fate (12)
    LossScaleExplorer(gradients)             a model's gradients times a loss scale against fp16's limits (12)

Every number an explorer draws comes from a pure, seeded function of ``bertcourse.experiments``
(importable without ipywidgets or matplotlib); ``gradient_norms_per_layer``, the measurement
ResidualExplorer draws, is re-exported here, where notebook 06 imports it from.

Later notebooks add their explorers in modules of their own in this subpackage; the shared
plumbing (Explorer) is in bertcourse.widgets._base.

Put an explorer as the last expression of a cell (or call ``.display()``) to show its
controls and its plot. Each control is an attribute, so code can move it too
(``explorer.layer.value = 3``), and ``explorer.drawn`` is a dict of what was drawn last:
always ``"matrix"`` (the tensor plotted), ``"title"`` and ``"figure"``, plus values
particular to each explorer (listed in its docstring). Redrawing happens at once, inside
the control's change, so ``drawn`` is up to date as soon as ``.value`` is set.

How they stay portable: core ipywidgets only (sliders, checkboxes, toggle buttons, a text
box, a dropdown, a label, boxes and ``interactive_output``), drawn with inline matplotlib and ``plt.show()``. No
ipympl, no JavaScript from a CDN, nothing that exists only in ipywidgets 8, so the same code
runs in Colab (ipywidgets 7.7.1), JupyterLab 4 and Binder (ipywidgets 8). Each figure is
closed after it is shown, so moving a slider a thousand times does not pile up figures.
For bertviz's browser head view of the same attentions, see ``bertcourse.plots``.
"""

from ..experiments import gradient_norms_per_layer
from .explorers import (
    AttentionExplorer,
    MaskingExplorer,
    PositionalEncodingExplorer,
    ResidualExplorer,
    ScalingExplorer,
)
from .finetuning import SaliencyExplorer  # notebook 10
from .inside import ModelViewExplorer, NeuronViewExplorer  # notebook 08
from .long_inputs import WindowExplorer  # notebook 11
from .precision import LossScaleExplorer, NumberFormatExplorer  # notebook 12
from .pretraining import FillMaskExplorer, MLMMaskingExplorer  # notebook 09

__all__ = [
    "AttentionExplorer",
    "FillMaskExplorer",
    "LossScaleExplorer",
    "MLMMaskingExplorer",
    "MaskingExplorer",
    "ModelViewExplorer",
    "NeuronViewExplorer",
    "NumberFormatExplorer",
    "PositionalEncodingExplorer",
    "ResidualExplorer",
    "SaliencyExplorer",
    "ScalingExplorer",
    "WindowExplorer",
    "gradient_norms_per_layer",
]
