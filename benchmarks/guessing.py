"""What a student scores on the catalogue's choice questions without reading them: content-blind strategies.

Run: python benchmarks/guessing.py [--challenges DIR] [--key FILE]

Prints, for each strategy of :func:`validator.instructor.regenerate.guess_scores` (always the longest
choice, the shortest, the same letter, avoiding always/never/only...), the expected number of right
answers over the catalogue's choice questions, next to chance (1/k per question). `validator
regenerate` warns when one of them is above 40%; tests/test_questions.py holds the catalogue to it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from validator.instructor.regenerate import GUESS_LIMIT, guess_scores
    from validator.questions import load_key
    from validator.spec import load_catalogue

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--challenges", default=str(ROOT / "challenges"))
    parser.add_argument("--key", default=str(ROOT / "reference" / "answer_key.yaml"))
    args = parser.parse_args()
    scores = guess_scores(load_catalogue(Path(args.challenges)), load_key(Path(args.key)))
    for name, (value, n) in scores.items():
        share = value / n if n else 0.0
        flag = "  <- over the limit" if name != "chance" and share > GUESS_LIMIT else ""
        print(f"{name:>14}: {value:5.1f} of {n} choice questions ({share:.0%}){flag}")
    print(f"limit for any strategy: {GUESS_LIMIT:.0%}")


if __name__ == "__main__":
    main()
