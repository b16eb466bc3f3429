from tests.mutants import Mutant

MUTANTS = [
    # Break It 4: the clock stops when the work is queued, not when it is done
    Mutant("time_proper_without_sync", "bench_attn",
           find="        fn(*args)\n"
                "        sync()                                # stop the clock",
           replace="        fn(*args)\n"
                   "        pass                                  # stop the clock",
           checks=("bench_attn.honest_timing",), idea="synchronise"),
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
    # a backend that cannot run here raises RuntimeError; catching only OOM lets it escape
    Mutant("probe_without_runtime_error", "bench_attn",
           find="        except RuntimeError:                  # not available here",
           replace="        except torch.OutOfMemoryError:        # not available here",
           checks=("bench_attn.backend_probe",), idea="RuntimeError"),
]
