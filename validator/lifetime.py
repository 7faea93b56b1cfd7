"""Whether this process is a short-lived command or a host that lives on (a test session).

The CLI's process entry (:func:`validator.cli.run`) marks itself short-lived; library calls and
tests leave the default. A short-lived process may trade memory it will never reuse for speed:
it freezes its heap once the worker's warm-up has imported everything (see
:func:`validator.worker.client.freeze_if_short_lived`), so that no later garbage collection
walks torch's quarter of a million objects again.
"""

SHORT_LIVED = False
