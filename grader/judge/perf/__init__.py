"""How fast, against PyTorch timed in the same run: the one perf harness (the grader's own
clock), the baselines, CUDA-event timing of trusted code, and the bands that turn a
measurement into credit."""
