"""Challenge specs: the YAML schema and a loader that reports errors by file and line."""

from validator.spec.loader import SpecError, load_challenge, load_catalogue
from validator.spec.schema import Challenge, CheckSpec, Entry, InputSpec, Question

__all__ = ["SpecError", "load_challenge", "load_catalogue", "Challenge", "CheckSpec",
           "Entry", "InputSpec", "Question"]
