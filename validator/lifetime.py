"""Whether this process is a short-lived command or a host that lives on (a test session).

The CLI's process entry (:func:`validator.cli.run`) and a batch slot's (:mod:`validator.batch.slot`)
mark themselves short-lived; library calls and tests leave the default. A short-lived process may
trade memory it will never reuse for speed: it freezes its heap (:func:`freeze_heap`) once the
worker's warm-up has imported everything, and a batch again as it goes, so that no later garbage
collection walks torch's quarter of a million objects (or what a batch keeps) again.
"""

SHORT_LIVED = False


def freeze_heap(*, collect: int | None = None) -> None:
    """In a short-lived process: put what is alive now out of the cyclic collector's sight (``gc.freeze``).

    It lives until exit, yet every full collection would walk it again (the one Hypothesis runs the first
    time it seeds its PRNG, the interpreter's own, the one at exit); what is created later is collected
    as before, and a frozen object is still freed when nothing refers to it. ``collect``: collect up to
    that generation first, so that cyclic garbage alive now is not frozen with it. Not in a host that
    lives on (a test session), where frozen objects that later became cyclic garbage would stay."""
    if SHORT_LIVED:
        import gc

        if collect is not None:
            gc.collect(collect)
        gc.freeze()
