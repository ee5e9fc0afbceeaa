"""The registered decision rule on the reads: each cell's verdict and its words, the outcome's
stability over resampled seeds, and every registered version's outcome."""
