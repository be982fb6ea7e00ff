"""The grader: deterministic structure measures, judge votes and the v1 consensus rules.

Each grading step is its own module: ``grades`` (the scale and the vote model), ``consensus``
(clause 5 of the contract) and ``coverage`` (structural coverage of the agent's SQL).
"""
