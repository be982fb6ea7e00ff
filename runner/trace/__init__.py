"""The trace's read side: what the run kept of each sample, read back for people and for other tools.

The write side is :mod:`runner.transcript` (below the gateway and the run); this package sits above the record, and
reads the journal, the transcripts and ``record.json`` alike. Read in this order:

- ``reader``: :func:`~runner.trace.reader.load_transcript` and :func:`~runner.trace.reader.list_transcripts`, which
  find a sample's parts through the journal and read them (each checked against its journaled sha256).
- ``conversation``: a request in any of the three wire APIs read as messages by role, and what a call added.
- ``timeline``: one sample in time order (model calls, the query log, the agent's own trace, the answer, the votes);
  ``text`` prints it for a terminal (``ispm trace``), ``sql_text`` finds and lays out its SQL within a budget.
- ``sample_page``: a sample's own page beside the run's report, and the report with its pages.
- ``atif``, ``inspect_log``: the timeline as an ATIF trajectory or an Inspect eval log; ``export`` writes them.
"""
