"""A typo: the file does not parse."""
import numpy as np


def softmax_safe(x)
    return np.exp(x) / np.exp(x).sum()
