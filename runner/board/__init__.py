"""The board: ``ispm board serve`` takes submitted agent images, runs them officially, and publishes signed records.

A submission moves through states kept in the board's database (``runner.board.db``)::

    received -> verified -> queued -> running -> auditing -> published
                                         \\-> failed (with the reason) | cancelled

Modules, in the order a submission meets them: ``config`` (what a board serves), ``db`` (the tables; Alembic
migrations in ``migrations/``), ``tokens`` (per-submitter bearer tokens, stored hashed), ``upload`` (the
``docker save`` stream to disk, capped, hashed on the way), ``quarantine`` (one image, the contract label, safe
names; loaded untagged under a board tag), ``worker`` (smoke test, the run, audit, bundle, signature),
``signing`` (the board's Ed25519 key; the statement and ``ispm verify`` are in ``runner.record.verify``),
``pages`` and ``app`` (the served site and API), ``serve`` (``ispm board serve`` and ``ispm board token
create``), ``client`` (``ispm submit``, ``ispm submit status``). The commands themselves are in
``runner.cli.board``; docs/board.md is the guide.
"""
