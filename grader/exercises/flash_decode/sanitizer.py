"""flash_decode's compute-sanitizer target (grader.sandbox.sanitize.target_of)."""

from grader.exercises.flash_decode.test_flash_decode import SANITIZER_TARGET as TARGET  # noqa: F401 - moved here by the split
