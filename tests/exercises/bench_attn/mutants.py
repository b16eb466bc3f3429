from tests.cases import Mutant

MUTANTS = [
    # Break It 4: the clock stops when the work is queued, not when it is done
    Mutant("time_proper_without_sync", "bench_attn",
           find="        fn(*args)\n"
                "        sync()                                # stop the clock",
           replace="        fn(*args)\n"
                   "        pass                                  # stop the clock",
           checks=("bench_attn.honest_timing",), idea="synchronise"),
    # rule 2: no warm-up, so the compile lands in the first timed call
    Mutant("time_proper_without_warmup", "bench_attn",
           find="    for _ in range(warmup):\n        fn(*args)\n    times = []",
           replace="    times = []",
           checks=("bench_attn.honest_timing",), idea="warm-up"),
    # rule 3: the sum of the timed calls instead of their median
    Mutant("time_proper_sum_not_median", "bench_attn",
           find="    return statistics.median(times)",
           replace="    return sum(times)",
           checks=("bench_attn.honest_timing",), idea="median"),
    # Break It 4b with a synchronize: it times the work, not the launch
    Mutant("warm_timer_synchronised", "bench_attn",
           find="    t0 = time.perf_counter()\n    fn(*args)\n    return (time.perf_counter() - t0) * 1e3\n\n\n"
                "def time_proper",
           replace="    t0 = time.perf_counter()\n    fn(*args)\n    torch.cuda.synchronize()\n"
                   "    return (time.perf_counter() - t0) * 1e3\n\n\ndef time_proper",
           checks=("bench_attn.dishonest_timers",), idea="synchronize"),
    # Break It 4a with a warm-up call: the compile is no longer in the number
    Mutant("cold_timer_warmed_up", "bench_attn",
           find='''        float milliseconds of that one call.
    """
    t0 = time.perf_counter()''',
           replace='''        float milliseconds of that one call.
    """
    fn(*args)
    t0 = time.perf_counter()''',
           checks=("bench_attn.dishonest_timers",), idea="cold call"),
    # the lesson's loop without its except: the first out-of-memory run ends the sweep
    Mutant("sweep_without_oom_except", "bench_attn",
           find="                    mem = peak_bytes(fn, q, k, v)\n"
                "                except torch.OutOfMemoryError:",
           replace="                    mem = peak_bytes(fn, q, k, v)\n"
                   "                except ValueError:",
           checks=("bench_attn.oom_recorded",), idea="OutOfMemoryError"),
    # counting one matmul instead of two (Q K^T and P V)
    Mutant("tflops_with_2_not_4", "bench_attn",
           find="flops = 4 * B * H * N * N * D",
           replace="flops = 2 * B * H * N * N * D",
           checks=("bench_attn.sweep_rows",), idea="tflops"),
    # every impl timed with the first one's function: the rows' ms belong to another impl
    Mutant("sweep_times_the_wrong_impl", "bench_attn",
           find="                    ms = time_proper(lambda: fn(q, k, v))",
           replace="                    ms = time_proper(lambda: next(iter(impls.values()))(q, k, v))",
           checks=("bench_attn.sweep_rows",), idea="time_proper"),
    # a backend that cannot run here raises RuntimeError; catching only OOM lets it escape
    Mutant("probe_without_runtime_error", "bench_attn",
           find="        except RuntimeError:                  # not available here",
           replace="        except torch.OutOfMemoryError:        # not available here",
           checks=("bench_attn.backend_probe",), idea="RuntimeError"),
]
