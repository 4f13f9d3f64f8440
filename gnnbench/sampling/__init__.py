"""Sampling and data pipeline: neighbour sampler, negatives, batch cache, subgraph batches."""
