"""The one-thread settings both sides' processes run with: a worker (grader.worker.worker, before
torch loads: no thread pool may start once its seccomp filter refuses new threads) and a
grading process of a parallel grade (grader.parallel: several of them, each starting a BLAS and
a torch thread per core, would crowd every core, the timed checks' included)."""

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
