"""How often the rule's go is wrong: the operating simulation at the measured levels and at
the bar (the nulls), and ``grpo-probe plan``, which sizes a design from them."""
