"""The flash_triton exercise: its registry rows (rows.py), its checks per layer (test_<layer>.py),
the inputs and references they share (reference.py), how the interpreter checks call and judge
flash_fwd (judging.py, with tiled_attention's mistakes.py for the hints), its kernel hooks
(kernel.py: provenance's moved inputs, the compute-sanitizer target) and its `make bench`
declarations (bench.py, and bench_hbm.py for the DRAM bytes)."""
