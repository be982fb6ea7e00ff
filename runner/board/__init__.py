"""The board: ``ispm board serve`` takes submitted agent images, runs them officially, and publishes signed records.

A submission moves through states kept in the board's database (``runner.board.db``)::

    received -> verified -> queued -> running -> auditing -> published
                                         \\-> failed (with the reason) | cancelled

Modules, in the order a submission meets them: ``config`` (what a board serves), ``db`` (the tables; Alembic
migrations in ``migrations/``) and ``states`` (a submission's state, one enum), ``tokens`` (per-submitter bearer
tokens, stored hashed), ``upload`` (the ``docker save`` stream read as it arrives, capped, hashed, its image
verified by ``runner.sandbox.image_archive``), ``quarantine`` (the contract label, no names; loaded from the
board's own archive of the verified blobs under a board tag), ``worker`` (smoke test, the run, audit, bundle,
signature), ``signing`` (the board's Ed25519 key; the statement and ``ispm verify`` are in
``runner.record.verify``), ``app`` and ``views`` (the served site and API, one module per kind of page), ``pages``
and ``pagecache`` and ``published`` (what the pages render and keep), ``serve`` (``ispm board serve`` and ``ispm
board token create``), ``client`` (``ispm submit``, ``ispm submit status``). The commands themselves are in
``runner.cli.board``; docs/board.md is the guide.
"""
