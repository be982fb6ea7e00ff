"""The tasks stage: task definitions, the agent's view of a task, and world-derived ground truth."""
