import numpy as np

def naive_attention(Q, K, V):
    """Q, K, V: (N, d). Build the full N x N score matrix, safe softmax, @ V."""
    ...

def tiled_attention(Q, K, V, Br=64, Bc=64):
    """Same result, never building anything bigger than Br x Bc.
    Outer loop over query blocks of Br rows; inner loop over key/value blocks of Bc rows.
    Keep m (Br,), l (Br,), acc (Br, d) for the current query block."""
    N, d = Q.shape
    scale = 1.0 / np.sqrt(d)
    O = np.empty_like(Q)
    for i in range(0, N, Br):
        q = Q[i:i + Br]
        m = np.full(q.shape[0], -np.inf)
        l = np.zeros(q.shape[0])
        acc = np.zeros_like(q)
        for j in range(0, N, Bc):
            ...  # scores, new max, p, alpha, update l and acc, m = m_new
        O[i:i + Br] = ...
    return O

