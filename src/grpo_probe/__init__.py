"""grpo-probe."""
