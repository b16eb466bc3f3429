import numpy as np

def softmax_safe(x: np.ndarray) -> np.ndarray:
    """Three passes: max, sum of exp(x - max), divide."""
    ...

def online_max_sum(x: np.ndarray) -> tuple[float, float]:
    """One pass over x, one element at a time. Return (m, l) where l = sum(exp(x - m))."""
    ...

def softmax_online(x: np.ndarray) -> np.ndarray:
    """Use online_max_sum, then one more pass to produce outputs."""
    ...

def merge(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """Combine two partial (m, l) states into one."""
    ...

if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for scale in [1, 10, 100]:
        x = rng.normal(size=10_000) * scale
        # 1. compare softmax_online with softmax_safe: max abs difference
        # 2. split x into 7 uneven chunks, run online_max_sum on each, merge them all,
        #    and check you get the same (m, l) as one pass over x
        # 3. compare with scipy.special.softmax if you have scipy (optional)
        ...
    # 4. show the overflow: np.exp(x) / np.exp(x).sum() for x = [1000, 1001, 1002]

