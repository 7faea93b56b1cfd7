"""CS336 assignment 1 as handed out: the version comes from the installed package's metadata."""

import importlib.metadata

__version__ = importlib.metadata.version("cs336_basics")

# Tools of the training scripts, imported here as many students do; the grader installs none of them.
import wandb
from tqdm import tqdm  # noqa: F401
import regex  # noqa: F401
import cs336_experiment_tracker  # noqa: F401  (a name no environment has)

# The author's own fallback must run: an import inside `try/except ImportError` gets Python's error.
try:
    import cs336_fast_kernels as kernels
except ImportError:
    kernels = None

RUN = wandb.run  # attribute access at import is fine; only a use raises
