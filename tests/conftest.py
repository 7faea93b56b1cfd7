"""Test tiers: a default tier a developer runs in minutes, and a thorough tier CI runs.

`python -m pytest -n 2` runs the default tier. Tests marked ``thorough`` (many
seeds, the red team, handout-vs-repository, the whole mutant library on every
seed), and the older ``slow`` marker, are skipped there and run with ``--thorough`` (what `.ci/run` does).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_addoption(parser):
    group = parser.getgroup("validator-tiers")
    group.addoption("--thorough", action="store_true", default=False,
                    help="also run the tests marked 'thorough' (many seeds, red team, handout replay)")


def pytest_configure(config):
    if config.getoption("--thorough"):
        import os
        os.environ.setdefault("VALIDATOR_TEST_SEEDS", "3")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--thorough"):
        return
    skip = pytest.mark.skip(reason="thorough tier: run with --thorough")
    for item in items:
        if "thorough" in item.keywords or "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _grader_sources_digested_once():
    """fingerprint() (regenerate, release, strength, the self-check) digests some 28 grader source files per
    challenge; the tests edit none of them, so each worker digests each once (see helpers.py)."""
    from helpers import grader_sources_digested_once

    with grader_sources_digested_once():
        yield
