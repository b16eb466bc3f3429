"""Was the answer made by the student's own kernel? Evidence gathered outside the
student's process: each gated call replayed in a replay worker from the kernels
alone, the kernel-use gate, Triton's front end, compute-sanitizer's verdict.
Its worker half is grader/worker/program.py (the recorded launches) and
grader/worker/replay.py (running them again)."""
