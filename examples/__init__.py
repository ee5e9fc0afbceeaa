"""Worked examples the tests bind: ``examples.my_flow_adapter`` is the README's adapter."""
