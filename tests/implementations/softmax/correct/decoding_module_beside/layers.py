"""layers.py imports its softmax from numerics.py and re-exports a sampler from decoding.py, which calls
torch.softmax: a module of the submission the graded entry never runs (advice only)."""

from decoding import sample  # noqa: F401 - the student's package API
from numerics import stable_softmax as softmax  # noqa: F401
