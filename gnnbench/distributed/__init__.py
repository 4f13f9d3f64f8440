"""Training on several ranks with torch.distributed: graph partitioning, halo exchange, data parallelism."""
