"""Staff-side batch grading: many submissions, each in its own sandboxed worker.

``grade`` (the command), ``pool`` (grading processes fed one submission at a
time), ``slot`` (one grading process), ``submissions`` (discovery, shards),
``merge`` (combine shard outputs), ``progress`` and ``reports`` (helpers).
The sandbox itself is :mod:`validator.sandbox`; the threat model is in
``docs/batch.md``.
"""
