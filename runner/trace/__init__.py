"""The trace stage: what the host saw of each sample's model calls, kept, checked and read back.

Read in this order:

- ``model``: the transcript's typed events (a model call, the cap reached), resolved to full content; the contract
  every reader builds on.
- ``storage``: the file format (gzip JSON, each piece of content once, a per-sample cap) and its builder.
- ``assemble``: a provider's reply (a body, or a stream's events) put together into one message.
- ``reader``: :func:`~runner.trace.reader.load_transcript` and :func:`~runner.trace.reader.list_transcripts`, which
  find a sample's files through the journal, check their sha256 and resolve their references.

Then the readers, built on the transcript:

- ``conversation``: a request in any of the three wire APIs read as messages by role, and what a call added.
- ``timeline``: one sample in time order (model calls, the query log, the agent's own trace, the answer, the votes);
  ``text`` prints it for a terminal (``ispm trace``), ``sql_text`` finds and lays out its SQL within a budget.
- ``atif``, ``inspect_log``: the timeline as an ATIF trajectory or an Inspect eval log; ``export`` writes them.

Nothing here imports at package import time, so the journal can use the models without a cycle.
"""
