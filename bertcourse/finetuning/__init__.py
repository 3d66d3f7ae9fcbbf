"""Fine-tuning (notebook 10): BERT adapted to a task, one module per part.

- ``heads``: the sequence, token and question-answering heads, with Hugging Face's weight names;
  the sentence head written out by hand (``classification_logits``); predictions in eval mode;
- ``tagging``: word labels on word pieces, and the capitalised-name tagging task;
- ``qa``: the best valid answer span, question windows with a stride, and the who-questions task;
- ``saliency``: gradient × input and occlusion, what pushes a prediction;
- ``reviews``: review batches, metrics and probabilities for sentence classification;
- ``baselines``: the majority class, a bag of words and a frozen probe, trained with the same loop;
- ``table``: notebook 10's committed table (``python -m bertcourse.finetuning.table``);
- ``checks``: the argument checks these modules share.

Every public name of the first six is importable from here, ``from bertcourse.finetuning import
best_span``; the older paths ``bertcourse.finetuning_data`` and ``bertcourse.finetuning_table`` still work.
"""

from ..heads import IGNORE_INDEX
from .baselines import FEATURES, BagOfWords, LinearOutput, LinearProbe, majority_class, sentence_features, words_of
from .heads import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    ClassifierOutput,
    QuestionAnsweringOutput,
    classification_logits,
    predict_labels,
)
from .qa import (
    QAExample,
    QuestionWindows,
    WindowCollator,
    answer_f1,
    best_span,
    decode_answer,
    question_windows,
    training_windows,
    who_questions,
)
from .reviews import ReviewCollator, classification_metrics, predict_probabilities, review_batches
from .saliency import gradient_x_input, occlusion
from .tagging import (
    NAME_LABELS,
    TaggingCollator,
    align_word_labels,
    encode_words,
    entity_scores,
    name_spans,
    name_tagging_examples,
    name_word_list,
    word_list_labels,
    word_predictions,
)

__all__ = [
    "IGNORE_INDEX",
    "FEATURES",
    "BagOfWords",
    "LinearOutput",
    "LinearProbe",
    "majority_class",
    "sentence_features",
    "words_of",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "ClassifierOutput",
    "QuestionAnsweringOutput",
    "classification_logits",
    "predict_labels",
    "QAExample",
    "QuestionWindows",
    "WindowCollator",
    "answer_f1",
    "best_span",
    "decode_answer",
    "question_windows",
    "training_windows",
    "who_questions",
    "ReviewCollator",
    "classification_metrics",
    "predict_probabilities",
    "review_batches",
    "gradient_x_input",
    "occlusion",
    "NAME_LABELS",
    "TaggingCollator",
    "align_word_labels",
    "encode_words",
    "entity_scores",
    "name_spans",
    "name_tagging_examples",
    "name_word_list",
    "word_list_labels",
    "word_predictions",
]
