"""Docs cannot drift: every field of the two published schemas, ``ispm schema answer`` and ``ispm schema
run-record``, has a description, nested models included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from runner.cli import main


def undocumented(schema: dict[str, Any]) -> list[str]:
    """``Model.field`` for every property without a description, over the schema and its ``$defs``."""
    models = {schema.get("title", "(root)"): schema, **schema.get("$defs", {})}
    return [
        f"{name}.{field}"
        for name, model in sorted(models.items())
        for field, prop in (model.get("properties") or {}).items()
        if "description" not in prop
    ]


@pytest.mark.parametrize("which", ["answer", "run-record"])
def test_every_published_field_is_documented(which: str) -> None:
    result = CliRunner().invoke(main, ["schema", which])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema["properties"]  # the schema is really there
    assert undocumented(schema) == []
