"""decision.json and decision.md: the record, its page and template, its figures and the
numbers the README and docs quote from the reference run."""
