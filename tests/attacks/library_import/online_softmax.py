"""Attack: a file beside the exercise that a library imports by itself. `import torch` tries
`opt_einsum`; a submission folder first on sys.path would hand it this folder's opt_einsum.py,
which runs before any check (here: it would write the canary the attack test looks for).
The grader copies only the exercise files into the sandbox, and the submission folder is last
on the worker's sys.path."""

import numpy as np
import torch  # noqa: F401 - the import that would have run opt_einsum.py


def softmax_safe(x):
    return np.zeros_like(x)


def online_max_sum(x):
    return 0.0, 0.0


def softmax_online(x):
    return np.zeros_like(x)


def merge(a, b):
    return 0.0, 0.0
