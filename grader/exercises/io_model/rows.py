"""io_model's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows). The hints quote the lesson's
counting ("What naive attention actually does", "Counting bytes: the IO argument")."""

from grader.schema import Check as _C, Exercise

EXERCISE = Exercise(
    "io_model", "Counting bytes: the IO model of attention (NumPy, plain Python)",
    frozenset({"numpy"}), "cpu", track="extension",
    seconds={"cpu": 1, "adversarial": 0.3},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=9)

CHECKS = [
    _C("io_model.naive_bytes", "cpu", 2,
       "naive_bytes: 4N^2 + 4Nd elements per head, in bytes, on random shapes and the lesson's 8K",
       "\"Count the bytes for one head, in elements. Reading Q and K is 2Nd. Writing S is N^2. "
       "Reading S back is N^2. Writing P is N^2. Reading P and V is N^2 + Nd. Writing O is Nd. "
       "Total: 4N^2 + 4Nd.\" Then times the bytes per element."),
    _C("io_model.naive_flops", "cpu", 1,
       "naive_flops: 4N^2 d per head",
       "\"The FLOPs for attention, per head, are about 4N^2 d: 2N^2 d for Q K^T and 2N^2 d for "
       "P V.\""),
    _C("io_model.intensity_flat_in_n", "cpu", 2,
       "naive_intensity: FLOPs per byte, about d / 2 whatever N is",
       "\"Arithmetic intensity (naive) = 4N^2 d / (8N^2) = d / 2 FLOPs per byte ... notice that "
       "the intensity does not depend on N. Longer sequences give you more work and "
       "proportionally more bytes, so you never climb out.\"",
       follows=("io_model.naive_bytes", "io_model.naive_flops")),
    _C("io_model.flash_worst_case", "cpu", 3,
       "flash_bytes_worst: Q once, K and V once per query block of Br rows, O once (Br != Bc, ragged N)",
       "\"Per head, the Q-block-outer version moves: Q: read once, Nd elements. K and V: read "
       "once per query block, so (N / Br) x 2Nd. O: written once, Nd. Total about 2Nd + "
       "2N^2 d / Br.\" A short last block still reads all of K and V: ceil(N / Br) blocks."),
    _C("io_model.flash_l2_case", "cpu", 1,
       "flash_bytes_l2: 4Nd when every K/V re-read hits in L2",
       "\"In the best case, real HBM traffic is just Q, K, V and O once: 4Nd, linear in N.\""),
    _C("io_model.flash_sram_theorem", "cpu", 2,
       "flash_bytes_sram: the worst case with Br = M / d, Theta(N^2 d^2 / M)",
       "\"Br and Bc end up around M / d for an SRAM of M elements. Substitute and the paper's "
       "theorem pops out: FlashAttention needs Theta(N^2 d^2 / M) HBM accesses.\""),
    _C("io_model.sp_memory", "cpu", 2,
       "sp_bytes and flash_state_bytes: 137 GB of S and P at 32K against 8 MB",
       "\"Naive's S and P need 2 x H x N^2 x 2 bytes; flash needs 2 numbers per query row. At "
       "N = 32K, that is 137 GB against 8 MB.\""),
    _C("io_model.ridge_point", "cpu", 1,
       "ridge_point: peak FLOP/s over bandwidth",
       "\"Compare it with the chip's ridge point (peak FLOP/s divided by bandwidth) to know which "
       "one limits you.\" The Spark's is around 460 on spec-sheet numbers."),
    _C("io_model.sram_bandwidth", "cpu", 1,
       "sram_bandwidth: SMs x 128 bytes per clock x clock",
       "\"That SRAM figure is just arithmetic: 108 SMs x 128 bytes per clock x 1.41 GHz = "
       "19.5 TB/s.\""),
    _C("io_model.memory_or_compute", "cpu", 2,
       "bound: memory-bound left of the ridge point, compute-bound right of it",
       "\"Naive attention at 64 sits well to the left: memory-bound\"; FlashAttention's "
       "intensity, about N, is \"far right of any ridge point\".",
       follows=("io_model.ridge_point",)),
    _C("io_model.exp_overflow", "adversarial", 2,
       "exp_overflow: where e^x overflows fp16 (11.09), fp32 (88.7) and fp64",
       "\"In fp16 the largest number is 65,504, and e^x passes that at x = 11.09 ... In fp32 it "
       "overflows at x = 88.7.\" The threshold is ln of the largest finite value."),
]
