"""Instructor tools: everything derived from the reference and the specs.

- ``stubgen``: the student stub from ``reference/layers.py`` (solution regions cut out).
- ``docs``: one Markdown page per challenge and the answers template, from the specs.
- ``fixtures``: reference results frozen as data, replayed where the reference is absent.
- ``selfcheck``: the reference with the key scores full marks, the stub scores zero.
- ``regenerate`` / ``release``: the two commands built on the above.
"""
