"""What the submission's source says before any of it runs: the static audit (a friendly
first message, never the wall) and which graded functions are still the stub."""
