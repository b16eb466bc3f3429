"""The wire format both sides share: the codec, seeded inputs, timed-run checksums, and the
one-thread settings of their processes.

grader.worker may import this package and nothing else of the grader; it imports nothing of the
grader but itself.
"""
