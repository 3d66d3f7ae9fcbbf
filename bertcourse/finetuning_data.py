"""The older import path of fine-tuning's data, baselines and derived tasks: now ``bertcourse.finetuning``
(``reviews``, ``baselines``, ``tagging``, ``qa``), kept so that code written against it still runs."""

from .finetuning import *  # noqa: F403
from .finetuning import __all__  # noqa: F401
