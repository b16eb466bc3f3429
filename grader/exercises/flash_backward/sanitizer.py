"""flash_backward's compute-sanitizer target (grader.sandbox.sanitize.target_of)."""

from grader.exercises.flash_backward.test_flash_backward import SANITIZER_TARGET as TARGET  # noqa: F401 - moved here by the split
