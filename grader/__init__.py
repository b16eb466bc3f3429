"""The FlashAttention lab's autograder.

The process that imports this package computes verdicts and writes reports; it never imports
student code. Student code runs only in worker processes (`grader.worker.worker`), reached through the
proxy in `grader.sandbox.proxy`. See docs/ARCHITECTURE.md for the map.
"""
