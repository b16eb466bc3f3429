import torch, triton
print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)
p = torch.cuda.get_device_properties(0)
print(p.name, "capability", torch.cuda.get_device_capability(0))   # expect (12, 1) on GB10
print("SMs", p.multi_processor_count, "total memory GB", p.total_memory / 1e9)
for attr in ["shared_memory_per_block_optin", "shared_memory_per_multiprocessor", "L2_cache_size", "regs_per_multiprocessor"]:
    print(attr, getattr(p, attr, "not exposed in this torch version"))

