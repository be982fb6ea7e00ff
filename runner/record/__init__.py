"""The public run record: its models and how it is built from a run's journal."""
