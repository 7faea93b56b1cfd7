"""Whether this process is a short-lived command or a host that lives on (a test session).

The CLI's process entry (:func:`validator.cli.run`) and a batch slot's (:mod:`validator.batch.slot`)
mark themselves short-lived; library calls and tests leave the default. A short-lived process may
trade memory it will never reuse for speed: it freezes its heap (:func:`freeze_heap`) once the
worker's warm-up has imported everything, and a batch again as it goes, so that no later garbage
collection walks torch's quarter of a million objects (or what a batch keeps) again.
"""

SHORT_LIVED = False


def become_short_lived() -> None:
    """Mark this process short-lived (the CLI's, a batch slot's, a benchmark that stands for one) and run it as
    one: freed memory kept for reuse (:func:`keep_freed_memory`), young objects collected less often
    (:func:`collect_less_often`); its heap is frozen where it says so (:func:`freeze_heap`)."""
    global SHORT_LIVED
    SHORT_LIVED = True
    keep_freed_memory()
    collect_less_often()


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


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_MMAP_THRESHOLD = 32 << 20  # glibc's largest on a 64-bit machine: it refuses more
_KEPT_FREE = 256 << 20


def keep_freed_memory() -> bool:
    """In a short-lived process, or the template whose forks are: keep memory that is freed for reuse.

    By default glibc's malloc maps each block over a threshold (128 KiB at first) afresh from the kernel and
    hands it back when it is freed, and trims the heap's free top: the next tensor or message buffer of that
    size then faults in every page again, zeroed by the kernel. A graded class submission moves ~48 MB of
    replies and as much again of inputs and outputs, and its worker took ~31,000 page faults (~0.1
    CPU-second of system time, benchmarks/where_time_goes.py --class). Here blocks up to 32 MiB come from the
    heap and up to 256 MiB of freed heap is kept, so a page once touched is reused: ~15,500 faults, most of
    the rest the copies a fork makes of the template's pages. The price would be memory kept that a process
    no longer uses; a worker lives for one submission, and a slot's largest resident size over 30 class
    submissions was the same as before (481 against 476 MB). glibc only (elsewhere nothing changes); True
    where it took. Not for a host that lives on (a test session): call it only in one of those processes."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # no C library that has it: macOS, Windows (musl's does nothing)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return all(mallopt(param, value) == 1 for param, value in (
        (_M_MMAP_THRESHOLD, _MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, _KEPT_FREE), (_M_TOP_PAD, 16 << 20)))


YOUNG_THRESHOLD = 10_000  # net allocations between young-generation collections (CPython's default: 700)


def collect_less_often() -> None:
    """In a short-lived process: a young-generation collection every 10,000 net allocations, not 700.

    A batch slot's grading made ~45 young collections a class submission and ~3 of the next generation
    (~13 ms of the grader's ~600); at 10,000, ~2 and none (~5 ms). The batch's own process (the CLI's), whose
    garbage mostly survives as reports kept for the class outputs, gains less: 30 submissions' collections
    took 443 ms before and 288 after. Cyclic garbage waits a little longer before it is freed, and both
    collect and freeze their heaps after each submission anyway (:func:`freeze_heap`). Not in a host that
    lives on (a test session)."""
    if SHORT_LIVED:
        import gc

        gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
