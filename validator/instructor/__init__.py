"""Instructor tools: everything derived from the reference and the specs.

- ``stubgen``: the student stub from ``reference/layers.py`` (solution regions cut out).
- ``docs``: one Markdown page per challenge and the answers template, from the specs.
- ``fixtures``: records the reference's results for handouts (replayed by ``validator.reference_side``)
  and knows when a recording is stale.
- ``selfcheck``: the reference with the key scores full marks, the stub scores zero.
- ``regenerate`` / ``release``: the two commands built on the above.
"""
