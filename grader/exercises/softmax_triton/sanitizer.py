"""softmax_triton's compute-sanitizer target (grader.sandbox.sanitize.target_of)."""

from grader.exercises.softmax_triton.test_softmax_triton import SANITIZER_TARGET as TARGET  # noqa: F401 - moved here by the split
