"""Grade student implementations of LLM layers against hidden references.

The package is split the way the grading flows:
spec/ loads and validates challenge YAML, cases.py turns a spec into
hypothesis-generated inputs, worker/ runs student code in a separate process,
runner.py executes one call (shared by the worker and the in-process
reference), checks/ holds one generic function per check test, grading.py
orchestrates a challenge, reporters/ render the plain-data results.
"""

__version__ = "0.1.0"

import warnings as _warnings

# torch's CPU wheel does not depend on numpy and warns at import when it is absent; the
# grader never needs numpy, so the warning would only be noise in every report.
_warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
# Hypothesis warns when a strategy's repr (which holds a drawn tensor) is long; the grader never shows it.
_warnings.filterwarnings("ignore", message="Generating overly large repr")


def check(*challenges, **options):
    """Grade, from a Jupyter notebook, what its kernel defined; the report shows as the cell's output.

    ``validator.check("token_embedding")``: see :func:`validator.jupyter.check` (the cells run in the
    grader's worker process, never in the kernel).
    """
    from validator.jupyter import check as _check

    return _check(*challenges, **options)
