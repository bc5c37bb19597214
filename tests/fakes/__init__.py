"""Stand-ins for system libraries the tests cannot have (NVML without a GPU)."""
