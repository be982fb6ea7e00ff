"""The transcript: what the host keeps of each sample's model calls, captured, redacted and stored once.

The write side of the trace, below the gateway (which captures the agent's calls) and the run (which writes them
beside the journal); :mod:`runner.trace` reads them back, above the record. Read in this order:

- ``model``: a transcript's events (a :class:`~runner.call.ModelCall`, the cap reached), the sample they belong to,
  and the reference a journal entry holds to a stored part.
- ``redact``: provider keys and gateway tokens out of everything kept.
- ``storage``: the file format (gzip JSON, each piece of content once, a per-sample cap), its builder, and reading a
  part back through its journaled reference.
- ``capture``: the gateway's writer thread and the judges' capture, which feed the builders.

Nothing here imports at package import time.
"""
