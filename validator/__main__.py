import sys

from validator.cli import run

sys.exit(run())
