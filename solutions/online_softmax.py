# BEGIN SOLUTION
"""Online softmax: the running max and running sum that FlashAttention is built on (reference).

Lesson sections "Softmax, the safe way" and "Online softmax: keep a running max and a running sum";
this is the first Build It file, online_softmax.py.

    softmax_safe    three passes over the row: max, sum of exp(x - max), divide
    online_max_sum  max and sum in ONE pass, one element at a time (Milakov and Gimelshein, 2018)
    softmax_online  online_max_sum, then one more pass for the outputs
    merge           combine two partial (m, l) states: what a tile, or a second worker, hands back

Run:
    python solutions/online_softmax.py          # the lesson's demo, on this file
    make check EX=online_softmax                # the grader's checks for this exercise
"""
# END SOLUTION
# BEGIN STUB
# """Online softmax: the running max and running sum that FlashAttention is built on.
#
# Lesson sections "Softmax, the safe way" and "Online softmax: keep a running max and a running sum";
# this is the first Build It file, online_softmax.py. Write four functions:
#
#     softmax_safe    three passes over the row: max, sum of exp(x - max), divide
#     online_max_sum  max and sum in ONE pass, one element at a time (Milakov and Gimelshein, 2018)
#     softmax_online  online_max_sum, then one more pass for the outputs
#     merge           combine two partial (m, l) states: what a tile, or a second worker, hands back
#
# Run:
#     python exercises/online_softmax.py          # the lesson's demo (raises until you fill it in)
#     make check EX=online_softmax                # the grader's checks for this exercise
# """
# END STUB
import math

import numpy as np
# BEGIN SOLUTION


def _work_dtype(x: np.ndarray) -> np.dtype:
    """The dtype to do the arithmetic in: float16 goes up to float32, as a GPU kernel would do.

    In float16, exp(x) overflows past x = 11.09 and a sum of thousands of terms loses most of its
    digits, so fp16 rows are read in fp16 but reduced in fp32. float32 and float64 keep their own.
    """
    return np.promote_types(x.dtype, np.float32)
# END SOLUTION


def softmax_safe(x: np.ndarray) -> np.ndarray:
    """Three passes: max, sum of exp(x - max), divide.

    Args:
        x: (n,) float16, float32 or float64, n >= 1.
    Returns:
        (n,) same dtype as x: exp(x - max(x)) / sum(exp(x - max(x))), entries in [0, 1], sum 1.
    """
    # BEGIN SOLUTION
    x = np.asarray(x)
    xw = x.astype(_work_dtype(x))
    m = xw.max()              # pass 1: read n
    e = np.exp(xw - m)        # pass 2: read n; every exponent is <= 0, so every e is in (0, 1]
    l = e.sum()
    return (e / l).astype(x.dtype)  # pass 3: read n, write n

    # END SOLUTION
    # BEGIN STUB
    # # TODO(online_softmax): roughly 4 lines.
    # #   pass 1: m = max of x
    # #   pass 2: l = sum of exp(x - m)   (every exponent <= 0, so nothing overflows)
    # #   pass 3: exp(x - m) / l
    # #   For float16 input, do the arithmetic in float32 and cast the result back to x.dtype.
    # raise NotImplementedError("TODO(online_softmax): softmax_safe - three passes: max, sum of exp(x - max), divide")
    # END STUB


def online_max_sum(x: np.ndarray) -> tuple[float, float]:
    # BEGIN SOLUTION
    """One pass over x, one element at a time. Return (m, l) where l = sum(exp(x - m)).

    Args:
        x: (n,) float16, float32 or float64; n = 0 gives the empty state (-inf, 0.0).
    Returns:
        (m, l) as Python floats: m = max(x), l = sum(exp(x - m)), the safe-softmax denominator.
    """
    m, l = -math.inf, 0.0     # the empty state: e^(-inf) = 0, so the first element starts l at 1
    for xi in np.asarray(x, dtype=np.float64).tolist():    # Python floats, one at a time
        m_new = max(m, xi)
        if m_new == -math.inf:
            # Only -inf (masked) scores so far: they add nothing, and exp(-inf - -inf) is nan.
            continue
        # Move every term already in l from the old max to the new one with a single factor
        # e^(m - m_new) (1 when the max did not change), then add the new term.
        l = l * math.exp(m - m_new) + math.exp(xi - m_new)
        m = m_new
    return m, l
    # END SOLUTION
    # BEGIN STUB
    # """One pass over x, one element at a time. Return (m, l) where l = sum(exp(x - m)).
    #
    # The grader checks the one pass: x.max() followed by exp(x - m).sum() reads x twice.
    #
    # Args:
    #     x: (n,) float16, float32 or float64; n = 0 gives the empty state (-inf, 0.0).
    # Returns:
    #     (m, l) as Python floats: m = max(x), l = sum(exp(x - m)), the safe-softmax denominator.
    # """
    # # TODO(online_softmax): roughly 6 lines.
    # #   start:  m = -inf, l = 0.0
    # #   for each element x_i:
    # #       m_new = max(m, x_i)
    # #       l     = l * exp(m - m_new) + exp(x_i - m_new)   # rescale the old sum, add the new term
    # #       m     = m_new
    # #   Use Python floats (math.exp) and return (m, l) as floats.
    # raise NotImplementedError("TODO(online_softmax): online_max_sum - one pass keeping a running max m and sum l")
    # END STUB


def softmax_online(x: np.ndarray) -> np.ndarray:
    """Use online_max_sum, then one more pass to produce outputs.

    Args:
        x: (n,) float16, float32 or float64, n >= 1.
    Returns:
        (n,) same dtype as x, equal to softmax_safe(x) up to rounding.
    """
    # BEGIN SOLUTION
    x = np.asarray(x)
    m, l = online_max_sum(x)                            # pass 1: max and sum together
    e = np.exp(x.astype(_work_dtype(x)) - m)            # pass 2: the outputs
    return (e / l).astype(x.dtype)

    # END SOLUTION
    # BEGIN STUB
    # # TODO(online_softmax): roughly 2 lines.
    # #   (m, l) from online_max_sum(x), then exp(x - m) / l, cast back to x.dtype.
    # raise NotImplementedError("TODO(online_softmax): softmax_online - (m, l) from online_max_sum, then exp(x - m) / l")
    # END STUB


def merge(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """Combine two partial (m, l) states into one.

    Args:
        a, b: (m, l) states from online_max_sum over two disjoint pieces of a row; (-inf, 0.0) is
            the empty state and may be on either side.
    Returns:
        (m, l) as Python floats, the state of the two pieces seen as one.
    """
    # BEGIN SOLUTION
    (m_a, l_a), (m_b, l_b) = (map(float, a)), (map(float, b))
    m = max(m_a, m_b)
    if m == -math.inf:
        # Both empty. Without this, e^(-inf - -inf) = e^nan would turn l into nan.
        return -math.inf, 0.0
    # Each sum was measured against its own max; rescale both to the larger one and add.
    # An empty side has m = -inf, so its factor is e^(-inf) = 0 and it drops out cleanly.
    return m, l_a * math.exp(m_a - m) + l_b * math.exp(m_b - m)
    # END SOLUTION
    # BEGIN STUB
    # # TODO(online_softmax): roughly 4 lines.
    # #   m = the larger of the two maxes; rescale each sum to it with exp(m_side - m) and add.
    # #   Careful with two empty states: exp(-inf - -inf) is nan. Return (-inf, 0.0) then.
    # raise NotImplementedError("TODO(online_softmax): merge - rescale both sums to the larger max and add them")
    # END STUB


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for scale in [1, 10, 100]:
        x = rng.normal(size=10_000) * scale
        # 1. compare softmax_online with softmax_safe: max abs difference
        diff = np.abs(softmax_online(x) - softmax_safe(x)).max()
        # 2. split x into 7 uneven chunks, run online_max_sum on each, merge them all,
        #    and check you get the same (m, l) as one pass over x
        cuts = np.sort(rng.choice(np.arange(1, x.size), size=6, replace=False))
        state = (-math.inf, 0.0)                        # the empty state: nothing seen yet
        for chunk in np.split(x, cuts):
            state = merge(state, online_max_sum(chunk))
        m, l = online_max_sum(x)
        same = state[0] == m and math.isclose(state[1], l, rel_tol=1e-12)
        print(f"scale {scale:>3}: max|online - safe| = {diff:.1e}; 7 chunks merged "
              f"(m, l) = ({state[0]:.4f}, {state[1]:.6f}), one pass ({m:.4f}, {l:.6f}): "
              f"{'same' if same else 'DIFFERENT'}")
        # 3. compare with scipy.special.softmax if you have scipy (optional)
        try:
            from scipy.special import softmax as scipy_softmax
        except ImportError:
            print("           scipy is not installed: skipping the scipy comparison")
        else:
            err = np.abs(softmax_online(x) - scipy_softmax(x)).max()
            print(f"           max|online - scipy| = {err:.1e}")
    # 4. show the overflow: np.exp(x) / np.exp(x).sum() for x = [1000, 1001, 1002]
    x = np.array([1000.0, 1001.0, 1002.0])
    with np.errstate(over="ignore", invalid="ignore"):  # we want to see the inf and nan here
        direct = np.exp(x) / np.exp(x).sum()
        fp16_exp = np.exp(np.float16(12.0))
    print(f"direct: {direct}   (e^1000 = inf in float64, and inf / inf = nan)")
    print(f"safe:   {softmax_safe(x)}")
    print(f"online: {softmax_online(x)}")
    print(f"float16: exp(12) = {fp16_exp}, yet softmax_safe([12, 11, 10]) = "
          f"{softmax_safe(np.array([12.0, 11.0, 10.0], dtype=np.float16))}")
