"""The validation study: does the probe's reading of each arm rank the arms as a GRPO pilot's gains do?

A study (``prereg/studies/*.yaml``, locked) names registered designs whose pilot runs on every arm, a
positive and a negative control among them; :mod:`grpo_probe.study.report` puts each arm's probe reads
beside its held-out gain and gives the rank correlation with its bootstrap interval.
"""
