"""The publisher's site: the contract, the tasks, the dataset, the leaderboard, the scoring page and how to submit.

Pure functions turn the project's own definitions (``runner.contract``, the rubrics, the task set and its ground
truth, the world's manifest, table specs and docs, ``docs/scoring.md``) and the published runs into typed page
models (``runner.site.model``) and then HTML (``runner.site.render``). The board serves the pages
(``runner.board.app``); ``ispm site build`` writes them as static files (``runner.site.build``). Only
``runner.site.sources`` reads files. docs/site.md says what each page holds and how fast it is.
"""
