"""What Inspect's ``inspect_ai`` entry point (named ``runner``) loads: importing the modules registers the
``ispm`` sandbox provider, the ``ispm_enterprise_sql`` task, the ``ispm_scorer`` scorer, the ``ispm_consensus``
reducer and the tools, each under ``runner/<name>`` (:mod:`.names`). Inspect offers no other way to register."""

from runner.inspect_eval import reducer, sandbox, scorer, task, tools

__all__ = ["reducer", "sandbox", "scorer", "task", "tools"]
