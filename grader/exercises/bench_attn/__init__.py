"""The bench_attn exercise: its registry rows (rows.py), its checks per layer (test_cpu.py,
test_adversarial.py, test_gpu.py), the simulated device its timers are judged on (reference.py),
what the checks and the hidden checks share: the timer judgement and the sweep's rows
(judging.py), and its `make bench` declaration (bench.py)."""
