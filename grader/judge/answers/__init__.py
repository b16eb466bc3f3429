"""Is the answer right? The inputs, the float64 references, the one comparison and the
one case runner, and whether a wrong answer equals a known mistake's (the hints' evidence; each
exercise's mistakes.py names its mistakes)."""
