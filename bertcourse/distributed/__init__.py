"""Data parallelism: the same model on several processes, each on its share of every batch.

Notebook 12 runs it on the CPU with the gloo backend, even where a GPU is visible; the same code runs on GPUs with
nccl when asked (``torchrun_command(..., gpus=True)``).

- ``data``: a tiny synthetic pretraining set in which every row has the same number of masked
  tokens, the tiny config (no dropout, so runs can be compared weight for weight), and
  ``rank_batch``: the rows a rank trains on at a step, through ``DistributedSampler`` with
  ``set_epoch``. ``accumulation_step`` is gradient accumulation, the one-machine equivalent.
- ``train``: the torchrun script (``python -m torch.distributed.run --standalone --nproc_per_node=2 -m
  bertcourse.distributed.train --out run``): DistributedDataParallel around 09's
  ``training.train_step``, rank-0 logging and saving, 09's checkpoints resumed under DDP.
- ``accelerate_train``: the same training with Hugging Face Accelerate (the seed article's loop,
  complete and corrected).
- ``reduction``: the global batch's loss from each rank's (sum, count) pair, right when the ranks hold
  different numbers of masked tokens (``global_mean_loss``, an exercise of notebook 12).
- ``launch``: runs such a job from a notebook or a test with a timeout, always kills its whole
  process group, and turns a worker's exception into a ``WorkerError`` naming the rank.
"""

from .data import accumulation_step, demo_config, make_dataset, rank_batch
from .launch import JobTimeout, WorkerError, run_job, torchrun_command
from .reduction import global_mean_loss

__all__ = [
    "JobTimeout",
    "WorkerError",
    "accumulation_step",
    "global_mean_loss",
    "make_dataset",
    "rank_batch",
    "run_job",
    "demo_config",
    "torchrun_command",
]
