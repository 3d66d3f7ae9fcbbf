"""Benchmarks, run with ``python -m bertcourse.bench``; see ``bertcourse.bench.__main__``.

forward     our BertModel against Hugging Face's on the real MiniLM weights: fast path and attention maps
training    one training step (forward, MLM loss, backward, AdamW) of our BertForPreTraining against theirs
"""
