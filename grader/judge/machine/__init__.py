"""What the machine is and can do: device profiles, the ceilings measured in the run
(copy bandwidth, matmul), and a grading target checked from another GPU (--target)."""
