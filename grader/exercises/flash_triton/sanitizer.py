"""flash_triton's compute-sanitizer target (grader.sandbox.sanitize.target_of)."""

from grader.exercises.flash_triton.test_flash_triton import SANITIZER_TARGET as TARGET  # noqa: F401 - moved here by the split
