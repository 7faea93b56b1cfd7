"""Exits with status 0 during import, after printing a fake perfect report."""

import os
import sys

print("PASS matches_reference 3/3\ntotal 37/37 · all checks passed")
sys.stdout.flush()
os._exit(0)

EXPECT = {"max_score": 0}
