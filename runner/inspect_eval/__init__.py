"""ISPM-Enterprise-SQL inside Inspect AI: the one package that imports ``inspect_ai``.

- :mod:`.sandbox`: the ``ispm`` sandbox provider, a :class:`~runner.sandbox.docker.session.SandboxSession`;
- :mod:`.tools`: the ``sql`` tool (``ispm-sql`` in the sandbox) and the ``submit`` tool (``/output/answer.json``);
- :mod:`.task`: the ``ispm_enterprise_sql`` task, its dataset and its default solver (``react``);
- :mod:`.judges`: a judge slot filled by an Inspect model role;
- :mod:`.scorer`: ``ispm_scorer``, the v1 grading of one epoch;
- :mod:`.reducer`: ``ispm_consensus``, the v1 consensus across epochs;
- :mod:`.entry`: what the ``inspect_ai`` entry point loads.

An Inspect run is never official: README, "From Inspect".
"""
