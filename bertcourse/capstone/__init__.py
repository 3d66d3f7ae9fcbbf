"""The capstone (notebook 13): the learner's own pieces of notebooks 01-07, assembled into BERT.

    result = start()                      # skeleton: writes my_bert.py next to the notebook, never overwrites
    pieces = load_pieces("my_bert.py")    # each function checked; an unwritten one is the reference's
    pieces.table()                        # the verdicts, and whose function the model uses
    model = assemble(pieces)              # MiniLM's weights, renamed by the learner's hf_to_ours
    compare(pieces, hf_model, batch)      # the first step that differs from Hugging Face's, and why

One module each: ``pieces`` (the twelve pieces by name, and the fallback to the reference), ``skeleton``
(``start``), ``assembly`` (the model whose every step calls a piece), ``compare`` (Hugging Face's steps, and
the report).
"""

from .assembly import AssembledBert, AssembledBertForPreTraining, PieceFailed, WeightsDoNotFit, assemble
from .compare import ATOL, RTOL, Report, compare, hugging_face_steps
from .pieces import PIECES, Pieces, load_pieces, notebook_of
from .skeleton import FILE_NAME, StartResult, skeleton, start

__all__ = [
    "ATOL",
    "FILE_NAME",
    "PIECES",
    "RTOL",
    "AssembledBert",
    "AssembledBertForPreTraining",
    "PieceFailed",
    "Pieces",
    "Report",
    "StartResult",
    "WeightsDoNotFit",
    "assemble",
    "compare",
    "hugging_face_steps",
    "load_pieces",
    "notebook_of",
    "skeleton",
    "start",
]
