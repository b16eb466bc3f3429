"""Is the answer right? The inputs, the float64 references, the one comparison and the
one case runner, and what a known mistake would have produced (the hints' evidence)."""
