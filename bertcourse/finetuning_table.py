"""The older import path of notebook 10's table: now ``bertcourse.finetuning.table``, kept so that code and
commands written against it (``python -m bertcourse.finetuning_table``) still run."""

from .finetuning.table import *  # noqa: F403
from .finetuning.table import main

if __name__ == "__main__":
    main()
