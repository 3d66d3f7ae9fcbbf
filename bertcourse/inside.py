r"""Inside BERT: measurements that say what the heads do, and how far attention explains the output.

Notebook 08 looks at a trained BERT from five sides; each has a function here, computed from the
model's own intermediate values, so it works for any model the package loads (a ``BertModel``,
or a model that holds one as ``.bert``, such as ``BertForPreTraining``):

``sentence_tokens``      the tokens of a sentence, checked (not empty, not past the position table):
                         the model view draws ``bertcourse.experiments.attention_maps`` for them.
``neuron_view``          the query and key vectors of one head, q_i, k_j, their scores q_i . k_j / sqrt(d_k)
                         and the softmax over each row: *why* a head attends where it does. They are
                         rebuilt from the layer's input (the hidden states) with the layer's own
                         ``query`` and ``key`` maps, and agree with the model's attention maps.
``head_directions``      the same scores in a basis the head itself defines: a single dimension of q
                         means nothing (rotate q and k by one orthogonal matrix and every score stays),
                         and the singular directions of the bilinear form W_Q W_K^T (bias included)
                         are the head's own only up to how its bias is folded in (``bias_scale``).
``head_role_scores``     how much of each head's attention goes to a role's target tokens (the previous
                         token, the next, [CLS], [SEP], the same word elsewhere, punctuation), pooled
                         over a set of sentences; ``role_score`` is the same for one attention map.
``attention_rollout``    Abnar & Zuidema (2020): attention followed through the layers, with the
                         residual connection counted as half of each layer's mixing.
``token_removal_effect`` a perturbation test: drop one token (mask it out) and measure how far the
                         sentence embedding moves. Attention weights are not explanations; this is
                         the measurement to hold them against. ``removal_effect`` removes a *set* of
                         tokens at once, as keys, from the pooling, or both.
``value_weighted_attention`` the value side (Kobayashi et al. 2020): what key j adds to query i's output is
                         a_ij v_j W_O, so a large weight on a token whose v_j W_O is short adds little.
``heads_ablated``        a context in which some heads are silenced: their slice of the merged
                         context is zeroed before the output projection W_O, so W_O ignores them
                         (Michel et al. 2019's head mask), or replaced by its mean over a batch
                         (mean-ablation). ``ablation_effects`` measures, head by head and layer by
                         layer, how far that moves the similarity of sentence pairs, pair by pair.

The sentences these measurements run on are data here, not in the notebook: ``PROBE_SENTENCES``
(50 sentences, many with repeated words), ``ABLATION_PAIRS`` (24 sentence pairs: paraphrases, pairs
on one topic that say different things, unrelated pairs), ``WORD_ORDER_PAIRS`` (24 pairs of the same
word pieces in an order that changes the meaning) and ``PARAPHRASE_PAIRS`` (24 paraphrases in other
words), ``WORD_PIECE_SENTENCES`` (20 sentences of rare words, 15 of them split into pieces) and
``DETERMINER_PHRASES`` (20 determiners, each with its noun two or three tokens on).

Everything is deterministic: no sampling, the model in ``eval()`` mode (these functions refuse a model
in training mode, whose dropout would make every number random), and gradients off. The model is
never changed: ``heads_ablated`` removes its hooks when the ``with`` block ends, even on an error.

Built this way because the two obvious routes fail. Hooks that capture q and k inside attention
would depend on the attention code's internals (the fused path never builds them); recomputing them
from the hidden states needs only the public modules. And a head mask as a new ``forward`` argument
would change every layer's signature for one experiment; a pre-hook on the output projection is
three lines and leaves ``bert.py`` alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import string

import torch

from ._validation import describe, require_float_tensor, require_index, require_tensor
from .bert import BertModel
from .masks import as_bool_mask, expand_padding_mask
from .multihead import split_heads
from .pooling import _mean_pooling, _normalize
from .training import on_device

ROLES = ("previous token", "next token", "[CLS]", "[SEP]", "same word elsewhere", "punctuation")
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "[MASK]"})


# --- the sentences the measurements run on ----------------------------------------------------------

# Short everyday sentences, many with a word that comes back ("the ... the"), for the head roles.
PROBE_SENTENCES = (
    "The cat sat on the mat, and the dog sat on the rug.",
    "She said that she would call, but she never did.",
    "A red car passed a blue car on the highway.",
    "The book on the table is the book I wanted.",
    "When the rain stopped, the children ran outside to play.",
    "He bought apples, pears, and plums at the market.",
    "My brother lives in Paris; my sister lives in Rome.",
    "The teacher asked a question, and the students answered the question.",
    "Is this the train to London, or is it the train to Leeds?",
    "The old man and the old woman walked slowly home.",
    "We planted trees in spring, and the trees grew quickly.",
    "After dinner, we washed the dishes and dried the dishes.",
    "The company hired ten engineers last year.",
    "Please close the door when you leave the room.",
    "The river flows north, then the river turns east.",
    "I like coffee in the morning and tea in the evening.",
    "The museum opens at nine and closes at five.",
    "Birds sing at dawn; frogs sing at dusk.",
    "The doctor told the patient to rest for a week.",
    "The phone rang twice, then the phone stopped ringing.",
    "Our team won the first game but lost the second game.",
    "The storm knocked down power lines across the city.",
    "Can you pass the salt, please?",
    "The baker bakes bread every morning, and the bread sells out by noon.",
    "A small boat crossed the lake at sunset.",
    "The scientist repeated the experiment, and the experiment failed again.",
    "They walked to the park, sat on a bench, and talked for hours.",
    "The price of gold rose sharply this week.",
    "Music played in the hall while guests danced in the hall.",
    "The child drew a house, a tree, and a sun.",
    "He opened the letter, read the letter, and smiled.",
    "The train was late, so we missed the meeting.",
    "Snow covered the mountains, and snow covered the valleys.",
    "The chef tasted the soup and added more salt.",
    "Every student must submit the essay by Friday.",
    "The lights went out during the concert.",
    "The farmer fed the cows, then the farmer fed the pigs.",
    "Why did the chicken cross the road?",
    "A good book is like a good friend.",
    "The police stopped the car and checked the driver's papers.",
    "The garden was full of roses, tulips, and daisies.",
    "She painted the fence white, and he painted the door green.",
    "The plane landed safely despite the strong wind.",
    "Reading a map is easier than reading a chart.",
    "The audience laughed when the actor forgot his line.",
    "The store sells shoes, hats, and coats.",
    "The kitten chased the ball until the ball rolled under the sofa.",
    "Water boils at one hundred degrees.",
    "The bridge was closed, so the cars took the long road.",
    "I lost my keys, found my keys, and lost them again!",
)

# (sentence, sentence) pairs for head ablation: 8 paraphrases, 8 pairs on one topic that say different
# things, 8 unrelated pairs, so that silencing a head can move a cosine up or down from any level.
ABLATION_PAIRS = (
    # paraphrases
    ("How old are you?", "What is your age?"),
    ("He is a physician.", "He works as a doctor."),
    ("The cat is sleeping on the sofa.", "A kitten naps on the couch."),
    ("Stock markets fell sharply today.", "Share prices dropped at the close."),
    ("The train was cancelled because of the snow.", "Snow forced the railway to call off the train."),
    ("She finished the report before lunch.", "The report was done by midday."),
    ("The children are playing in the garden.", "Kids play outside in the yard."),
    ("I can't find my keys anywhere.", "My keys are missing."),
    # same topic, different claim
    ("The restaurant was full on Friday night.", "The restaurant closed for good last year."),
    ("He plays the piano every evening.", "He sold his old piano to a neighbour."),
    ("The river flooded the town in spring.", "The town built a bridge over the river."),
    ("Our team won the final match.", "Our team lost every match this season."),
    ("The museum opens at nine.", "The museum is famous for its paintings."),
    ("She bought a new phone yesterday.", "Her phone broke when she dropped it."),
    ("The soup needs more salt.", "The soup was served cold."),
    ("The plane landed safely in the storm.", "The storm delayed every flight today."),
    # unrelated
    ("A man is playing a guitar.", "The stock market fell."),
    ("The baby is laughing at the dog.", "Interest rates rose by half a point."),
    ("Water boils at one hundred degrees.", "She painted the fence green."),
    ("The library lends books for free.", "A storm knocked down the power lines."),
    ("He fixed the bicycle in the shed.", "The election results came in late."),
    ("Please close the window.", "Tigers hunt mostly at night."),
    ("The coffee machine is broken again.", "Mountains are covered in snow in winter."),
    ("The exam starts at ten tomorrow.", "Bees make honey from flowers."),
)

# Sentence embeddings against a bag of words: pairs whose word pieces are the same, in another order that changes
# the meaning (who did what to whom, where "not" sits), and paraphrases that share few words.
WORD_ORDER_PAIRS = (
    ("The dog bit the man.", "The man bit the dog."),
    ("The movie was not good, it was bad.", "The movie was not bad, it was good."),
    ("I would never say that you are wrong.", "I would say that you are never wrong."),
    ("The cat chased the mouse.", "The mouse chased the cat."),
    ("Anna paid Tom for the car.", "Tom paid Anna for the car."),
    ("The teacher thanked the student.", "The student thanked the teacher."),
    ("The boy is taller than the girl.", "The girl is taller than the boy."),
    ("Only he eats fish on Fridays.", "He eats only fish on Fridays."),
    ("The company bought the bank.", "The bank bought the company."),
    ("The guests arrived after the band.", "The band arrived after the guests."),
    ("The price went up, not down.", "The price went down, not up."),
    ("The lawyer sued the doctor.", "The doctor sued the lawyer."),
    ("My sister writes to my mother every week.", "My mother writes to my sister every week."),
    ("The red car is behind the blue truck.", "The blue car is behind the red truck."),
    ("Everyone likes someone.", "Someone likes everyone."),
    ("The police arrested the thief.", "The thief arrested the police."),
    ("The river is north of the city.", "The city is north of the river."),
    ("She was happy, not sad.", "She was sad, not happy."),
    ("The small dog chased the big cat.", "The big dog chased the small cat."),
    ("Water turns into ice when it is cold.", "Ice turns into water when it is cold."),
    ("The patient called the nurse.", "The nurse called the patient."),
    ("Our team beat their team.", "Their team beat our team."),
    ("He left the party early and came home late.", "He left the party late and came home early."),
    ("The child is afraid of the dog.", "The dog is afraid of the child."),
)

# Paraphrases: the same meaning in other words.
PARAPHRASE_PAIRS = (
    *ABLATION_PAIRS[:8],  # the ablation set's eight paraphrases, then sixteen more
    ("The meeting has been postponed.", "The meeting was moved to a later date."),
    ("He bought a new car.", "He purchased a new vehicle."),
    ("It is raining heavily outside.", "There is a downpour out there."),
    ("The shop closes at six.", "The store shuts at 6 pm."),
    ("She is very happy with the result.", "The outcome pleased her a lot."),
    ("Can you help me carry this box?", "Would you give me a hand with this box?"),
    ("The film was boring.", "The movie was dull."),
    ("The road is closed for repairs.", "Roadworks have shut the street."),
    ("He forgot his umbrella at home.", "He left his umbrella behind at the house."),
    ("The flight was delayed by two hours.", "The plane took off two hours late."),
    ("I am starving.", "I am very hungry."),
    ("The concert was sold out.", "There were no tickets left for the show."),
    ("She is fluent in three languages.", "She speaks three tongues well."),
    ("The bridge collapsed during the flood.", "The flood brought down the bridge."),
    ("Prices have gone up a lot this year.", "Things have become much more expensive this year."),
    ("The baby would not stop crying.", "The infant kept on wailing."),
)

# Determiners and their nouns with words between them ("the old man"), for a head of Clark et al.'s kind: each
# entry is (sentence, ((determiner, noun), ...)), token positions with [CLS] at 0. The noun is never the next token.
DETERMINER_PHRASES = (
    ("The old man walked slowly home.", ((1, 3),)),
    ("A red car passed the bus.", ((1, 3),)),
    ("She wore a long blue coat.", ((3, 6),)),
    ("The tall tree fell in the storm.", ((1, 3),)),
    ("We found a small wooden box.", ((3, 6),)),
    ("The young doctor smiled.", ((1, 3),)),
    ("He read an interesting old book.", ((3, 6),)),
    ("A strong cold wind blew all night.", ((1, 4),)),
    ("The hungry cat ate the fish.", ((1, 3),)),
    ("They bought a big house.", ((3, 5),)),
    ("The little girl laughed.", ((1, 3),)),
    ("A loud noise woke the baby.", ((1, 3),)),
    ("The new teacher arrived early.", ((1, 3),)),
    ("I saw a beautiful white horse.", ((3, 6),)),
    ("The empty room was quiet.", ((1, 3),)),
    ("An angry dog barked at us.", ((1, 3),)),
    ("The brave soldier returned.", ((1, 3),)),
    ("She has a very kind heart.", ((3, 6),)),
    ("The dark clouds gathered.", ((1, 3),)),
    ("A famous singer came to town.", ((1, 3),)),
)

# Sentences of rare words, 15 of the 20 split by the WordPiece vocabulary ("catalogue ##d", "un ##bel ##ie ##va ##bly").
WORD_PIECE_SENTENCES = (
    "The archaeologist catalogued the pottery shards.",
    "Unbelievably, the reconfiguration succeeded.",
    "The photosynthesis experiment needs sunlight.",
    "My grandmother knits colourful scarves.",
    "The hippopotamus wallowed in the riverbank mud.",
    "Cryptocurrency exchanges were overwhelmed.",
    "The veterinarian vaccinated the puppies.",
    "Thermodynamics explains refrigerators.",
    "The choreographer rehearsed tirelessly.",
    "Biodegradable packaging reduces landfill waste.",
    "The parliamentarians deliberated overnight.",
    "Kaleidoscopes fascinate toddlers.",
    "The meteorologist forecasted thunderstorms.",
    "Her embroidery won the competition.",
    "The saxophonist improvised beautifully.",
    "Microorganisms decompose fallen leaves.",
    "The lighthouse keeper rescued shipwrecked sailors.",
    "Astronauts photographed the nebula.",
    "The blacksmith hammered the horseshoe.",
    "Entrepreneurs pitched their prototypes.",
)


# --- the model view and the neuron view ------------------------------------------------------------


def sentence_tokens(model, tokenizer, text) -> list[str]:
    """The word pieces of ``text`` with [CLS] and [SEP], checked to be a sentence the model can read.

    Raises ``ValueError`` for an empty sentence or one longer than the model's position table
    (the tokenizer would silently cut it at 512); ``TypeError`` unless ``text`` is a string.
    """
    bert = bert_of(model)
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string, got {describe(text)}.")
    if not text.strip():
        raise ValueError("`text` is empty: type a sentence.")
    tokens = tokenizer.tokenize(text)
    limit = bert.config.max_position_embeddings
    if len(tokens) > limit:
        raise ValueError(
            f"`text` has {len(tokens)} tokens with [CLS] and [SEP], but the model has learned positions for "
            f"{limit} only: shorten it (a few sentences at most)."
        )
    return tokens


@dataclasses.dataclass
class NeuronView:
    """One head's queries and keys for one sentence, and what they give.

    ``q`` and ``k`` are (seq, d_k); ``scores`` (seq, seq) is q k^T / sqrt(d_k), ``weights`` its
    softmax over each row (the head's attention map). ``product(i, j)`` is q_i * k_j element by
    element (d_k,): its sum divided by sqrt(d_k) is ``scores[i, j]``. ``q_directions`` and
    ``k_directions`` (seq, d_k) are the same vectors in the head's own directions
    (``head_directions``): ``product(i, j, basis="directions")`` sums to the same score.
    """

    tokens: list[str]
    layer: int
    head: int
    q: torch.Tensor  # (seq, d_k)
    k: torch.Tensor  # (seq, d_k)
    scores: torch.Tensor  # (seq, seq)
    weights: torch.Tensor  # (seq, seq)
    q_directions: torch.Tensor  # (seq, d_k)
    k_directions: torch.Tensor  # (seq, d_k)

    @property
    def d_k(self) -> int:
        return self.q.shape[-1]

    def product(self, query: int, key: int, basis: str = "dimensions") -> torch.Tensor:
        """q_query * k_key, element by element: (d_k,). Positions count from 0 ([CLS]).

        ``basis="dimensions"`` multiplies the head's coordinates as the model computes them;
        ``basis="directions"`` multiplies the coordinates along the head's singular directions.
        """
        for name, position in (("query", query), ("key", key)):
            require_index(name, position, len(self.tokens), "tokens")
        if basis == "dimensions":
            return self.q[query] * self.k[key]  # (d_k,)
        if basis == "directions":
            return self.q_directions[query] * self.k_directions[key]  # (d_k,)
        raise ValueError(f"`basis` must be 'dimensions' or 'directions', got {basis!r}.")


def neuron_view(model, tokenizer, text: str, layer: int, head: int) -> NeuronView:
    """The query and key vectors of head ``head`` of layer ``layer`` for ``text``, and their scores.

    Rebuilt from the model's own intermediate values: the layer's input (hidden state ``layer``: the
    embeddings, then the layers below it, and only those) goes through that layer's ``query`` and
    ``key`` maps and is split into heads. The softmax of ``scores`` equals the model's own map,
    ``bertcourse.experiments.attention_maps(...)[1][layer][head]``.
    """
    tokens = sentence_tokens(model, tokenizer, text)
    bert = bert_of(model)
    require_index("layer", layer, bert.config.num_hidden_layers, "layers")
    require_index("head", head, bert.config.num_attention_heads, "heads")
    batch = on_device(tokenizer(text), bert)
    with torch.no_grad():
        x = bert.embeddings(batch["input_ids"], batch["token_type_ids"])  # (1, seq, hidden): hidden state 0
        for encoder_layer in bert.encoder.layers[:layer]:
            x, _ = encoder_layer(x)  # (1, seq, hidden); one sentence, no padding, so no mask
        q, k, scores, weights = _query_key(bert.encoder.layers[layer], x, head)
    to_q, to_k, _ = head_directions(model, layer, head)
    q, k = q[0], k[0]  # (seq, d_k) each
    return NeuronView(tokens, layer, head, q, k, scores[0], weights[0], q @ to_q, k @ to_k)


def head_directions(
    model, layer: int, head: int, bias_scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""(to_q, to_k, strengths): the head's own directions, in which its scores are a sum of rank-1 parts.

    A score is :math:`q_i \cdot k_j = \tilde x_i \tilde W_Q \tilde W_K^\top \tilde x_j^\top`, with
    :math:`\tilde x = [x, c]` and :math:`\tilde W = [W; b / c]` (hidden + 1, d_k), ``c = bias_scale``:
    rotating q and k by one orthogonal matrix changes every coordinate and no score, and the bilinear
    form :math:`M = \tilde W_Q \tilde W_K^\top` does not change with it. Its singular value
    decomposition :math:`M = \sum_r s_r u_r v_r^\top` is unique (up to signs) for one choice of ``c``,
    but ``c`` (or folding a LayerNorm gain into W) changes M and its directions and no score: the
    directions are the head's own only up to how its bias is folded in. In those directions a score is
    :math:`\sum_r s_r (\tilde x_i \cdot u_r)(\tilde x_j \cdot v_r)`. ``q @ to_q`` and ``k @ to_k``
    (d_k, d_k) give those coordinates, :math:`\sqrt{s_r}\,\tilde x \cdot u_r` and
    :math:`\sqrt{s_r}\,\tilde x \cdot v_r`, strongest first, so that their element-wise product still
    sums to :math:`q_i \cdot k_j`. ``strengths`` (d_k,) are the singular values :math:`s_r`.
    """
    bert = bert_of(model)
    require_index("layer", layer, bert.config.num_hidden_layers, "layers")
    require_index("head", head, bert.config.num_attention_heads, "heads")
    if isinstance(bias_scale, bool) or not isinstance(bias_scale, (int, float)) or not bias_scale > 0:
        raise ValueError(
            f"bias_scale must be a positive number (the constant coordinate c of [x, c]), got {bias_scale!r}"
        )
    attention = bert.encoder.layers[layer].attention
    d_k = bert.config.hidden_size // bert.config.num_attention_heads
    rows = slice(head * d_k, (head + 1) * d_k)  # this head's outputs of the query and key maps
    with torch.no_grad():
        w_q = torch.cat(
            [attention.query.weight[rows].T, attention.query.bias[None, rows] / bias_scale]
        ).double()  # (hidden + 1, d_k)
        w_k = torch.cat(
            [attention.key.weight[rows].T, attention.key.bias[None, rows] / bias_scale]
        ).double()  # (hidden + 1, d_k)
        _, r_q = torch.linalg.qr(w_q)  # w_q = basis_q r_q, r_q (d_k, d_k)
        _, r_k = torch.linalg.qr(w_k)
        u, strengths, v_t = torch.linalg.svd(r_q @ r_k.T)  # M = basis_q (u diag(s) v^T) basis_k^T
        to_q = torch.linalg.solve(r_q, u) * strengths.sqrt()  # (d_k, d_k): q -> sqrt(s_r) (x~ . u_r)
        to_k = torch.linalg.solve(r_k, v_t.T) * strengths.sqrt()  # (d_k, d_k): k -> sqrt(s_r) (x~ . v_r)
    dtype = attention.query.weight.dtype
    return to_q.to(dtype), to_k.to(dtype), strengths.to(dtype)


def _query_key(encoder_layer, layer_input, head):
    """The textbook lines of one head, from the input x of its (Post-LN) layer, (batch, seq, hidden); no padding."""
    attention = encoder_layer.attention
    q = split_heads(attention.query(layer_input), attention.num_heads)[:, head]  # (batch, seq, d_k)
    k = split_heads(attention.key(layer_input), attention.num_heads)[:, head]  # (batch, seq, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (batch, seq, seq)
    return q, k, scores, scores.softmax(dim=-1)  # ..., weights (batch, seq, seq), each row sums to 1


# --- head roles, by measurement -------------------------------------------------------------------


def role_targets(tokens) -> dict[str, torch.Tensor]:
    """For each role of ``ROLES``, a bool (seq, seq) matrix: True at (i, j) when key j is a target of query i.

    previous token: j = i - 1.  next token: j = i + 1.  [CLS] / [SEP]: every such token.
    same word elsewhere: j != i holds the same whole-word token (not a special token, punctuation
    or a ``##`` piece).  punctuation: every punctuation token. A query without targets (the first
    token has no previous one; most words occur once) takes no part in that role's score.
    """
    _check_tokens(tokens)
    n = len(tokens)
    positions = torch.arange(n)  # (seq,)
    is_cls = torch.tensor([t == "[CLS]" for t in tokens])  # (seq,)
    is_sep = torch.tensor([t == "[SEP]" for t in tokens])  # (seq,)
    is_punctuation = torch.tensor([_is_punctuation(t) for t in tokens])  # (seq,)
    is_word = torch.tensor([_is_whole_word(t) for t in tokens])  # (seq,)
    same_token = torch.tensor([[a == b for b in tokens] for a in tokens])  # (seq, seq)
    every_query = torch.ones(n, 1, dtype=torch.bool)  # (seq, 1)
    return {
        "previous token": positions[None, :] == positions[:, None] - 1,  # (seq, seq)
        "next token": positions[None, :] == positions[:, None] + 1,
        "[CLS]": every_query & is_cls[None, :],
        "[SEP]": every_query & is_sep[None, :],
        "same word elsewhere": same_token & is_word[:, None] & (positions[None, :] != positions[:, None]),
        "punctuation": every_query & is_punctuation[None, :],
    }


def word_piece_targets(tokens) -> torch.Tensor:
    """A role of your own making: bool (seq, seq), True at (i, j) when j != i is another piece of i's word.

    A word is a token that does not start with ``##`` followed by the ``##`` pieces after it
    ("catalogue ##d"); a word of one piece, a special token or punctuation has no target.
    """
    _check_tokens(tokens)
    return _word_piece_targets(tokens)


def _word_piece_targets(tokens):
    starts = torch.tensor([not token.startswith("##") for token in tokens])  # (seq,): a word begins here
    word = starts.cumsum(dim=0)  # (seq,): which word each piece belongs to
    positions = torch.arange(len(tokens))  # (seq,)
    return (word[:, None] == word[None, :]) & (positions[:, None] != positions[None, :])  # (seq, seq)


def role_score(attention: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    r"""The share of attention a map gives to its targets, averaged over the queries that have one.

    attention: (..., seq, seq) weights, rows are queries (e.g. (layers, heads, seq, seq));
    targets: bool (seq, seq), True at (i, j) when key j is a target of query i (``role_targets``).
    Returns (...): :math:`\frac{1}{|Q|}\sum_{i \in Q}\sum_{j:\,T_{ij}} A_{ij}`, where Q are the
    queries with at least one target. 1 means all of it; NaN when no query has a target.
    """
    require_tensor("attention", attention, min_dim=2)
    require_float_tensor("attention", attention)
    seq = attention.shape[-1]
    if attention.shape[-2] != seq:
        raise ValueError(f"`attention` must end in square (seq, seq) maps, got {describe(attention)}.")
    targets = as_bool_mask("targets", targets)
    if targets.shape != (seq, seq):
        raise ValueError(f"`targets` must have shape (seq, seq) = {(seq, seq)}, got {describe(targets)}.")
    return _role_score(attention, targets.to(attention.device))


def _role_score(attention, targets):
    mass, queries = _role_mass(attention, targets)  # (...), number of queries that have a target
    return mass / queries  # (...): the mean share over those queries


def _role_mass(attention, targets):
    """The attention on targets, summed over queries, and how many queries have a target."""
    on_targets = (attention * targets).sum(dim=-1)  # (..., seq): each query's attention on its targets
    return on_targets.sum(dim=-1), targets.any(dim=-1).sum(dim=-1)  # (...), () or (batch,) counts


@dataclasses.dataclass
class HeadRoles:
    """``head_role_scores``' result. For each role: ``scores`` (layers, heads), ``uniform`` the score of
    a head that spreads its attention evenly over the sentence (the level of no preference), and
    ``queries`` how many queries took part."""

    scores: dict[str, torch.Tensor]
    uniform: dict[str, float]
    queries: dict[str, int]

    def best(self, role: str) -> tuple[int, int, float]:
        """(layer, head, score) of the head that scores highest for ``role``."""
        if role not in self.scores:
            raise ValueError(f"`role` must be one of {tuple(self.scores)}, got {role!r}.")
        score = self.scores[role]  # (layers, heads)
        layer, head = divmod(int(score.argmax()), score.shape[1])
        return layer, head, float(score[layer, head])


def head_role_scores(model, tokenizer, sentences, roles=None) -> HeadRoles:
    """Score every head for every role over ``sentences`` (a list of strings).

    ``roles`` maps a role's name to a function ``targets(tokens) -> bool (seq, seq)`` (your own
    roles); None scores the six of ``ROLES`` with ``role_targets``. The sentences run as one padded
    batch; each role's score is the attention on its targets summed over every counted query of
    every sentence, divided by the number of those queries (``role_score`` pooled over sentences, so
    a long sentence counts by its queries).
    """
    if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)) or not sentences:
        raise TypeError(f"`sentences` must be a non-empty list of strings, got {describe(sentences)}.")
    if roles is None:
        roles = {role: (lambda tokens, role=role: role_targets(tokens)[role]) for role in ROLES}
    if not isinstance(roles, dict) or not roles or not all(callable(f) for f in roles.values()):
        raise TypeError(f"`roles` must be a dict of name -> targets(tokens) functions, got {describe(roles)}.")
    token_lists = [sentence_tokens(model, tokenizer, text) for text in sentences]
    bert = bert_of(model)
    batch = on_device(tokenizer(list(sentences)), bert)
    with torch.no_grad():
        attentions = torch.stack(bert(**batch, output_attentions=True).attentions, dim=1)
    # attentions: (batch, layers, heads, seq, seq)
    seq = attentions.shape[-1]
    real = batch["attention_mask"].bool()  # (batch, seq)
    uniform = real[:, None, :].expand(-1, seq, -1) / real.sum(dim=-1)[:, None, None]  # (batch, seq, seq)
    scores, uniform_scores, queries = {}, {}, {}
    for role, make_targets in roles.items():
        targets = torch.stack([_padded(_role_of(role, make_targets, tokens), seq) for tokens in token_lists])
        targets = targets.to(attentions.device)  # (batch, seq, seq)
        mass, counted = _role_mass(attentions, targets[:, None, None])  # (batch, layers, heads), (batch, 1, 1)
        uniform_mass, _ = _role_mass(uniform, targets)  # (batch,)
        total = int(counted.sum())
        scores[role] = (mass.sum(dim=0) / max(total, 1)).cpu()  # (layers, heads)
        uniform_scores[role] = float(uniform_mass.sum()) / max(total, 1)
        queries[role] = total
    return HeadRoles(scores, uniform_scores, queries)


def _role_of(role, make_targets, tokens):
    targets = make_targets(tokens)
    n = len(tokens)
    if not isinstance(targets, torch.Tensor) or targets.shape != (n, n):
        raise ValueError(
            f"role {role!r} must give a (seq, seq) = {(n, n)} tensor for {tokens}, got {describe(targets)}."
        )
    return targets.bool().cpu()


def _check_tokens(tokens) -> None:
    if isinstance(tokens, str) or not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise TypeError(f"`tokens` must be a list of token strings, got {describe(tokens)}.")
    if not tokens:
        raise ValueError("`tokens` is empty: pass the tokens of a sentence, [CLS] and [SEP] included.")


def _padded(targets, seq):
    """A sentence's (n, n) targets inside (seq, seq) False: padding is nobody's target or query."""
    out = torch.zeros(seq, seq, dtype=torch.bool)
    n = targets.shape[0]
    out[:n, :n] = targets
    return out


def _is_punctuation(token: str) -> bool:
    return token not in SPECIAL_TOKENS and all(ch in string.punctuation for ch in token)


def _is_whole_word(token: str) -> bool:
    return token not in SPECIAL_TOKENS and not _is_punctuation(token) and not token.startswith("##")


# --- what attention does not tell you ---------------------------------------------------------------


def attention_rollout(attentions, residual: bool = True) -> torch.Tensor:
    r"""Attention followed through every layer (Abnar & Zuidema 2020): how much of each input token
    reaches each position at the top.

    attentions: one (..., heads, seq, seq) tensor per layer, first layer first -- the tuple
    ``BertModel(..., output_attentions=True).attentions``, or those stacked into one tensor
    (layers, ..., heads, seq, seq). Each layer's heads are averaged; with ``residual`` (the
    paper's method), the residual connection is added as the identity,
    :math:`\hat A = \tfrac12 A + \tfrac12 I`, rows renormalised; then
    :math:`R = \hat A_L \cdots \hat A_2 \hat A_1`. Returns (..., seq, seq): row i says how much
    of each input token ends up in position i's top-layer vector, under the (false) assumption
    that everything a layer does is mix tokens linearly by its average attention.
    """
    if isinstance(attentions, torch.Tensor):
        require_tensor("attentions", attentions, min_dim=4)
        attentions = tuple(attentions)  # (layers, ..., heads, seq, seq) -> one tensor per layer
    if not isinstance(attentions, (list, tuple)) or not attentions:
        raise TypeError(
            f"`attentions` must be a non-empty tuple of per-layer tensors (..., heads, seq, seq), or one tensor "
            f"(layers, ..., heads, seq, seq), got {describe(attentions)}."
        )
    for index, layer_maps in enumerate(attentions):
        require_tensor(f"attentions[{index}]", layer_maps, min_dim=3)
        require_float_tensor(f"attentions[{index}]", layer_maps)
        if layer_maps.shape != attentions[0].shape or layer_maps.shape[-1] != layer_maps.shape[-2]:
            raise ValueError(
                f"`attentions[{index}]` must have the shape of `attentions[0]` {tuple(attentions[0].shape)} "
                f"and end in square (seq, seq) maps, got {describe(layer_maps)}."
            )
    return _attention_rollout(attentions, residual)


def _attention_rollout(attentions, residual):
    seq = attentions[0].shape[-1]
    identity = torch.eye(seq, dtype=attentions[0].dtype, device=attentions[0].device)  # (seq, seq)
    rollout = None
    for layer_maps in attentions:
        mixing = layer_maps.mean(dim=-3)  # (..., seq, seq): the heads averaged
        if residual:
            mixing = 0.5 * mixing + 0.5 * identity  # the residual path keeps half of each token itself
            mixing = mixing / mixing.sum(dim=-1, keepdim=True)  # rows sum to 1 again
        rollout = mixing if rollout is None else mixing @ rollout  # (..., seq, seq): this layer after the ones below
    return rollout


def pooled_attention(attention: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The weight each key token gets in the *mean-pooled* output: the mean of the rows of real queries.

    attention: (batch, seq, seq), one map per sentence (a head, the heads' mean, or a rollout);
    attention_mask: (batch, seq), 1 at real tokens. Returns (batch, seq); each row sums to 1 when
    the maps' rows do. The same masked mean as ``bertcourse.pooling.mean_pooling``, over queries.
    """
    require_tensor("attention", attention, ndim=3)
    require_float_tensor("attention", attention)
    batch, seq, keys = attention.shape
    if seq != keys:
        raise ValueError(f"`attention` must be square maps (batch, seq, seq), got {describe(attention)}.")
    if attention_mask is None:
        mask = torch.ones(batch, seq, dtype=torch.bool, device=attention.device)
    else:
        mask = as_bool_mask("attention_mask", attention_mask)
        if mask.shape != (batch, seq):
            raise ValueError(f"`attention_mask` must have shape (batch, seq) = {(batch, seq)}, got {describe(mask)}.")
    return _mean_pooling(attention, mask.to(attention.device))  # (batch, seq): mean over real query rows


def token_removal_effect(model, tokenizer, text: str) -> tuple[list[str], torch.Tensor]:
    """(tokens, effects): how far the sentence embedding moves when each token is removed.

    Token p is removed by masking it out (``attention_mask`` 0 at p): no token attends to it and
    the mean pooling leaves it out, while every other token keeps its position. The embedding is
    the sentence-transformers recipe (``bertcourse.pooling``); ``effects[p]`` is
    1 - cos(embedding, embedding without token p), 0 when nothing moves. One batch of seq + 1 rows.
    """
    tokens = sentence_tokens(model, tokenizer, text)
    bert = bert_of(model)
    batch = on_device(tokenizer(text), bert)
    n = len(tokens)
    keep = ~torch.eye(n, dtype=torch.bool, device=batch["input_ids"].device)  # (seq, seq): row p drops token p
    mask = torch.cat([torch.ones(1, n, dtype=torch.bool, device=keep.device), keep])  # (1 + seq, seq)
    with torch.no_grad():
        hidden = bert(
            batch["input_ids"].expand(n + 1, -1),
            attention_mask=mask,
            token_type_ids=batch["token_type_ids"].expand(n + 1, -1),
        ).last_hidden_state  # (1 + seq, seq, hidden)
        embeddings = _normalize(_mean_pooling(hidden, mask))  # (1 + seq, hidden), unit rows
    return tokens, (1.0 - embeddings[1:] @ embeddings[0]).cpu()  # (seq,)


def removal_effect(model, tokenizer, text: str, positions, *, as_key: bool = True, pooled: bool = True) -> float:
    """1 - cos(embedding, embedding with the tokens at ``positions`` removed), all of them at once.

    ``as_key``: no token may attend to them (``attention_mask`` 0 there); ``pooled``: the mean pooling
    leaves them out. Both (the default) is ``token_removal_effect`` for a set of tokens; one alone
    tells apart what a token gives as a key of attention from what it gives to the mean.
    """
    tokens = sentence_tokens(model, tokenizer, text)
    if isinstance(positions, int) or not isinstance(positions, (list, tuple)) or not positions:
        raise TypeError(f"`positions` must be a non-empty list of token positions, got {describe(positions)}.")
    for position in positions:
        require_index("positions[...]", position, len(tokens), "tokens in this sentence")
    if not (as_key or pooled):
        raise ValueError("`as_key` and `pooled` are both False: nothing would be removed.")
    bert = bert_of(model)
    batch = on_device(tokenizer(text), bert)
    full = torch.ones(1, len(tokens), dtype=torch.bool, device=batch["input_ids"].device)  # (1, seq)
    removed = full.clone()
    removed[0, list(positions)] = False  # (1, seq)
    keys = torch.cat([full, removed if as_key else full])  # (2, seq): row 0 the sentence, row 1 without them
    pooling = torch.cat([full, removed if pooled else full])  # (2, seq)
    with torch.no_grad():
        hidden = bert(
            batch["input_ids"].expand(2, -1), attention_mask=keys, token_type_ids=batch["token_type_ids"].expand(2, -1)
        ).last_hidden_state  # (2, seq, hidden)
        embeddings = _normalize(_mean_pooling(hidden, pooling))  # (2, hidden), unit rows
    return float(1.0 - embeddings[0] @ embeddings[1])


def value_weighted_norms(attention: torch.Tensor, values: torch.Tensor, output_weight: torch.Tensor) -> torch.Tensor:
    r"""How much key j adds to query i's output, head by head: :math:`\lVert a_{ij}\, v_j W_O^h \rVert`.

    attention: (..., heads, seq, seq) weights; values: (..., heads, seq, d_k), the value vectors;
    output_weight: (hidden, heads * d_k), the output projection's ``nn.Linear`` weight (out x in).
    A head's output at query i is :math:`\sum_j a_{ij}\, v_j W_O^h` (its rows of W_O^T, the same
    as its columns of the weight), so a big weight on a key whose :math:`v_j W_O^h` is short adds
    little (Kobayashi et al. 2020). Returns (..., heads, seq, seq).
    """
    require_tensor("attention", attention, min_dim=3)
    require_float_tensor("attention", attention)
    require_tensor("values", values, min_dim=3)
    require_float_tensor("values", values)
    require_tensor("output_weight", output_weight, ndim=2)
    heads, seq, d_k = values.shape[-3:]
    if attention.shape[-3:] != (heads, seq, seq) or attention.shape[:-3] != values.shape[:-3]:
        raise ValueError(
            f"`attention` must be (..., heads, seq, seq) = (..., {heads}, {seq}, {seq}) to match `values` "
            f"{tuple(values.shape)}, got {describe(attention)}."
        )
    if output_weight.shape[1] != heads * d_k:
        raise ValueError(
            f"`output_weight` must be (hidden, heads * d_k) = (hidden, {heads * d_k}), got {describe(output_weight)}."
        )
    return _value_weighted_norms(attention, values, output_weight)


def _value_weighted_norms(attention, values, output_weight):
    return attention * _value_lengths(values, output_weight)[..., None, :]  # (..., heads, seq, seq): a_ij ||v_j W_O^h||


def _value_lengths(values, output_weight):
    """(..., heads, seq): ||v_j W_O^h||, the length of what key j sends through head h."""
    heads, d_k = values.shape[-3], values.shape[-1]
    w_o = output_weight.T.reshape(heads, d_k, -1)  # (heads, d_k, hidden): head h's rows of W_O^T
    return (values @ w_o).norm(dim=-1)  # (..., heads, seq): v_j W_O^h is (hidden,), its norm


@dataclasses.dataclass
class ValueWeighted:
    """``value_weighted_attention``'s result, for a padded batch of sentences: ``weights`` and ``norms``
    (batch, layers, heads, seq, seq), the attention weights a_ij and ||a_ij v_j W_O^h||; ``lengths``
    (batch, layers, heads, seq), ||v_j W_O^h||; ``mask`` (batch, seq), True at real tokens; ``tokens``
    one list per sentence."""

    tokens: list[list[str]]
    weights: torch.Tensor
    norms: torch.Tensor
    lengths: torch.Tensor
    mask: torch.Tensor


def value_weighted_attention(model, tokenizer, sentences) -> ValueWeighted:
    """Every head's weights and value-weighted norms (``value_weighted_norms``) over ``sentences``, one batch."""
    if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)) or not sentences:
        raise TypeError(f"`sentences` must be a non-empty list of strings, got {describe(sentences)}.")
    token_lists = [sentence_tokens(model, tokenizer, text) for text in sentences]
    bert = bert_of(model)
    batch = on_device(tokenizer(list(sentences)), bert)
    with torch.no_grad():
        out = bert(**batch, output_attentions=True, output_hidden_states=True)
        lengths = []
        for layer, encoder_layer in enumerate(bert.encoder.layers):
            attention = encoder_layer.attention
            values = split_heads(attention.value(out.hidden_states[layer]), attention.num_heads)
            lengths.append(_value_lengths(values, attention.output.weight))  # (batch, heads, seq)
    weights = torch.stack(out.attentions, dim=1).cpu()  # (batch, layers, heads, seq, seq)
    lengths = torch.stack(lengths, dim=1).cpu()  # (batch, layers, heads, seq)
    norms = weights * lengths[..., None, :]  # (batch, layers, heads, seq, seq): a_ij ||v_j W_O^h||
    return ValueWeighted(token_lists, weights, norms, lengths, batch["attention_mask"].bool().cpu())


def rank_correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman's rank correlation of two 1-D tensors of the same length: 1 = the same order, -1 = reversed.

    Ranks break ties by position, which is exact for the continuous measurements of this module.
    """
    for name, x in (("a", a), ("b", b)):
        require_tensor(name, x, ndim=1)
    if a.shape != b.shape or a.numel() < 2:
        raise ValueError(f"`a` and `b` must have the same length, at least 2, got {describe(a)} and {describe(b)}.")
    ranks = torch.stack([x.double().argsort().argsort().double() for x in (a, b)])  # (2, n)
    return float(torch.corrcoef(ranks)[0, 1])


# --- head ablation ---------------------------------------------------------------------------------


@contextlib.contextmanager
def heads_ablated(model, heads, mean_of=None):
    """Inside ``with heads_ablated(model, [(layer, head), ...]):`` those heads contribute nothing.

    Each listed head's slice of the merged context (batch, seq, heads * d_k) is zeroed just before
    the output projection W_O, which is what a head mask of 0 does, and the same as zeroing that
    head's columns of W_O. With ``mean_of`` (a tokenizer batch), the slice is instead replaced by its
    mean over the real tokens of that batch, run through the intact model (*mean-ablation*: the
    head keeps its average contribution and loses only what depends on the input). The weights are
    not touched; the hooks go when the block ends.
    """
    bert = bert_of(model)
    heads = _checked_heads(heads, bert.config)
    means = None if mean_of is None else _context_means(bert, on_device(mean_of, bert))  # (layers, hidden)
    with _ablation_hooks(bert, heads, means):
        yield model


@contextlib.contextmanager
def _ablation_hooks(bert, heads, means):
    d_k = bert.config.hidden_size // bert.config.num_attention_heads
    keep = torch.ones(bert.config.num_hidden_layers, bert.config.hidden_size, dtype=torch.bool)
    for layer, head in heads:
        keep[layer, head * d_k : (head + 1) * d_k] = False  # this head's slice of the merged context
    hooks = []
    try:
        for layer in sorted({layer for layer, _ in heads}):
            output = bert.encoder.layers[layer].attention.output
            fill = None if means is None else means[layer].to(output.weight.device)
            hooks.append(
                output.register_forward_pre_hook(_replace_features(keep[layer].to(output.weight.device), fill))
            )
        yield
    finally:
        for hook in hooks:
            hook.remove()


def _replace_features(keep, fill):
    def hook(module, inputs):
        (context,) = inputs  # (batch, seq, heads * d_k): the heads side by side, before W_O
        if fill is None:
            return (context * keep,)  # the silenced heads' features are 0
        return (torch.where(keep, context, fill),)  # the silenced heads' features are their mean

    return hook


def _context_means(bert, batch) -> torch.Tensor:
    """(layers, hidden): each layer's merged context (the input of W_O), averaged over the batch's real tokens."""
    captured = []

    def capture(module, inputs):
        captured.append(inputs[0])  # (batch, seq, heads * d_k)

    hooks = [layer.attention.output.register_forward_pre_hook(capture) for layer in bert.encoder.layers]
    try:
        with torch.no_grad():
            bert(**batch)
    finally:
        for hook in hooks:
            hook.remove()
    real = batch["attention_mask"].bool()  # (batch, seq)
    return torch.stack([context[real].mean(dim=0) for context in captured])  # (layers, hidden)


@dataclasses.dataclass
class Ablation:
    """``ablation_effects``' result. ``similarity`` (pairs,) is each pair's cosine with every head on;
    ``changes`` (layers, heads, pairs) the signed change of each pair's cosine when one head is
    silenced, ``layer_changes`` (layers, pairs) when every head of a layer is. ``per_head``
    (layers, heads) and ``per_layer`` (layers,) are the mean |change| over the pairs."""

    similarity: torch.Tensor
    changes: torch.Tensor
    layer_changes: torch.Tensor

    @property
    def per_head(self) -> torch.Tensor:
        return self.changes.abs().mean(dim=-1)  # (layers, heads)

    @property
    def per_layer(self) -> torch.Tensor:
        return self.layer_changes.abs().mean(dim=-1)  # (layers,)


def ablation_effects(model, tokenizer, pairs, mean: bool = False) -> Ablation:
    """Silence each head in turn, then each layer's heads together, and measure the sentence pairs.

    pairs: a list of (sentence, sentence). Each measurement is one batch of every pair's two
    sentences, embedded with the sentence-transformers recipe; what is kept is each pair's change
    of cosine similarity. ``mean=True`` mean-ablates (``heads_ablated(..., mean_of=...)``, the means
    taken over this batch) instead of zeroing. A head of layer l changes nothing below it, so each
    run starts from the (unchanged) input of layer l.
    """
    if not isinstance(pairs, (list, tuple)) or not pairs or not all(_is_pair(p) for p in pairs):
        raise TypeError(f"`pairs` must be a non-empty list of (sentence, sentence) pairs, got {describe(pairs)}.")
    bert = bert_of(model)
    for sentence in (s for pair in pairs for s in pair):
        sentence_tokens(bert, tokenizer, sentence)  # each one checked before any work
    batch = on_device(tokenizer([s for pair in pairs for s in pair]), bert)
    real = batch["attention_mask"].bool()  # (2 * pairs, seq)
    mask = expand_padding_mask(real)  # (2 * pairs, 1, 1, seq)
    config = bert.config
    means = _context_means(bert, batch) if mean else None  # (layers, hidden)
    with torch.no_grad():
        layer_inputs = bert(**batch, output_hidden_states=True).hidden_states  # (layers + 1) x (2 * pairs, seq, hidden)

    def similarities(start):
        hidden = layer_inputs[start]  # (2 * pairs, seq, hidden)
        with torch.no_grad():
            for encoder_layer in bert.encoder.layers[start:]:
                hidden, _ = encoder_layer(hidden, mask)  # (2 * pairs, seq, hidden)
        embeddings = _normalize(_mean_pooling(hidden, real))  # (2 * pairs, hidden), unit rows
        return (embeddings[0::2] * embeddings[1::2]).sum(dim=-1).cpu()  # (pairs,): the cosines

    baseline = similarities(config.num_hidden_layers)  # no layer left to run: the model's own output
    changes = torch.zeros(config.num_hidden_layers, config.num_attention_heads, len(pairs))
    layer_changes = torch.zeros(config.num_hidden_layers, len(pairs))
    for layer in range(config.num_hidden_layers):
        for head in range(config.num_attention_heads):
            with _ablation_hooks(bert, [(layer, head)], means):
                changes[layer, head] = similarities(layer) - baseline
        with _ablation_hooks(bert, [(layer, head) for head in range(config.num_attention_heads)], means):
            layer_changes[layer] = similarities(layer) - baseline
    return Ablation(baseline, changes, layer_changes)


def _is_pair(pair) -> bool:
    return isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(s, str) for s in pair)


def _checked_heads(heads, config) -> list[tuple[int, int]]:
    if isinstance(heads, (str, torch.Tensor)) or not isinstance(heads, (list, tuple, set)):
        raise TypeError(f"`heads` must be a list of (layer, head) pairs, got {describe(heads)}.")
    checked = []
    for pair in heads:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise TypeError(f"`heads` must hold (layer, head) pairs, got the entry {pair!r}.")
        require_index("layer", pair[0], config.num_hidden_layers, "layers")
        require_index("head", pair[1], config.num_attention_heads, "heads")
        checked.append((pair[0], pair[1]))
    return checked


# --- shared checks ---------------------------------------------------------------------------------


def bert_of(model) -> BertModel:
    """The ``BertModel`` inside ``model`` (itself, or its ``.bert``), checked to be in eval mode."""
    bert = model if isinstance(model, BertModel) else getattr(model, "bert", None)
    if not isinstance(bert, BertModel):
        raise TypeError(
            f"`model` must be a bertcourse BertModel (or hold one as `.bert`), got {type(model).__name__}: "
            "load one with `bertcourse.load_pretrained()`."
        )
    if bert.training:
        raise ValueError(
            "`model` is in training mode, so dropout would make every measurement random: call `model.eval()` "
            "first (`load_pretrained()` returns it in eval mode)."
        )
    return bert


__all__ = [
    "ROLES",
    "Ablation",
    "HeadRoles",
    "NeuronView",
    "ablation_effects",
    "attention_rollout",
    "head_role_scores",
    "heads_ablated",
    "head_directions",
    "neuron_view",
    "pooled_attention",
    "rank_correlation",
    "role_score",
    "role_targets",
    "sentence_tokens",
    "removal_effect",
    "token_removal_effect",
    "ValueWeighted",
    "value_weighted_attention",
    "value_weighted_norms",
    "word_piece_targets",
]
