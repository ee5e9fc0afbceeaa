"""One cell's tables to its reads: the rollout and anchor tables, the per-seed join and group
statistics, the chaos decomposition, guards, entropy, the gradient read and the bootstrap."""
