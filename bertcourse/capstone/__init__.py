"""The capstone (notebook 13): the learner's own pieces of notebooks 01-07, assembled into BERT.

    result = start()                      # skeleton: writes my_bert.py next to the notebook, never overwrites
    pieces = load_pieces("my_bert.py")    # each function checked; an unwritten one is the reference's
    pieces.table()                        # the verdicts, and whose function the model uses
    model = assemble(pieces)              # MiniLM's weights, renamed by the learner's hf_to_ours
    compare(pieces, hf_model, batch)      # the first step that differs from Hugging Face's, and why
    yours, reference = classifier_pair(pieces)   # two review classifiers that differ only in the encoder's code

One module each: ``pieces`` (the twelve pieces by name, and the fallback to the reference), ``skeleton``
(``start``), ``assembly`` (the model whose every step calls a piece), ``differences`` (the first step beyond
tolerance, the relative error by layer: the two exercises of notebook 13), ``compare`` (Hugging Face's steps,
and the report), ``explorer`` (any catalogued mistake of a piece, put in place, and its report), ``uses`` (the
classifier trained through the pieces).
"""

from .assembly import AssembledBert, AssembledBertForPreTraining, PieceFailed, WeightsDoNotFit, assemble
from .collect import Collected, collect, drive_folder
from .compare import ATOL, RTOL, Report, compare, hugging_face_steps
from .differences import beyond_tolerance, first_difference, relative_error_by_layer
from .explorer import MistakeExplorer, mistake_options
from .pieces import PIECES, Pieces, load_pieces, notebook_of
from .skeleton import FILE_NAME, StartResult, skeleton, start
from .uses import MeanPooledClassifier, classifier_pair

__all__ = [
    "ATOL",
    "FILE_NAME",
    "PIECES",
    "RTOL",
    "AssembledBert",
    "AssembledBertForPreTraining",
    "Collected",
    "MeanPooledClassifier",
    "MistakeExplorer",
    "PieceFailed",
    "Pieces",
    "Report",
    "StartResult",
    "WeightsDoNotFit",
    "assemble",
    "beyond_tolerance",
    "classifier_pair",
    "collect",
    "compare",
    "drive_folder",
    "first_difference",
    "hugging_face_steps",
    "load_pieces",
    "mistake_options",
    "notebook_of",
    "relative_error_by_layer",
    "skeleton",
    "start",
]
