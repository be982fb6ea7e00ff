"""The names our objects have in Inspect's registry: always ``runner/<name>`` (:mod:`runner.inspect_names`).

Inspect prefixes a registered name with the top-level package (``runner``) only where it finds that package
installed under the same distribution name, as from a wheel; from an editable checkout (``make venv``) it does
not, since our distribution is ``ispm-enterprise-sql``. Unprefixed names are never looked up through entry points
(``inspect eval runner/ispm_enterprise_sql`` loads the ``runner`` entry point), so we give the prefix ourselves
where Inspect would not.
"""

from __future__ import annotations

# Private to Inspect, at the version the inspect extra pins: the one place that decides the prefix.
from inspect_ai._util.registry import registry_name

from runner.inspect_names import qualified


def registered(name: str) -> str:
    """What to pass to an Inspect decorator so that ``name`` is registered as ``runner/<name>``."""
    return name if registry_name(registered, name) == qualified(name) else qualified(name)
