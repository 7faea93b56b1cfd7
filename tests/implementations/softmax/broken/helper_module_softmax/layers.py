"""layers.py is clean; the softmax it returns comes from a helper module whose module-level alias is the
library's torch.softmax. The source check follows the import and the alias; the run-time check sees the kernel."""

from numerics import softmax_along

MAY_FAIL = ["no_library_softmax_source", "no_library_softmax_runtime"]
MESSAGES = {"no_library_softmax_source": "numerics.py:3"}


def softmax(x, dim):
    return softmax_along(x, dim)
