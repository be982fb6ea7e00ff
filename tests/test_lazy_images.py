"""Images are built when something names them (issue 31): `make demo` builds only the base and the calibration agent
it runs, `ispm run` only its agent (the first time it is named), `make images` every one."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import docker
import pytest

from runner import pipeline
from runner.run.calibration import calibration_spec
from runner.run.spec import RunSpec
from runner.sandbox import images
from runner.sandbox.build import ImageError
from runner.sandbox.images import ImageRef, ensure_images, needed_specs

ROOT = Path(__file__).resolve().parent.parent


class Named(Exception):
    """Raised by the stand-in for ensure_images, carrying the names it was asked for."""


def asked(*_: Any, names: list[str] | None = None, **__: Any) -> dict[str, ImageRef]:
    raise Named(names)


def test_a_named_image_needs_only_its_parents() -> None:
    assert [s.name for s in needed_specs(["agent-replay"])] == ["base", "agent-replay"]
    assert [s.name for s in needed_specs(["agent-mini-swe-agent", "agent-null"])] == [
        "base", "agent-null", "agent-mini-swe-agent",
    ]  # fmt: skip
    assert needed_specs(None) == list(images.SPECS)
    with pytest.raises(ImageError, match="no such image: agent-nope"):
        needed_specs(["agent-nope"])


def test_images_are_built_in_generations_each_after_its_parent() -> None:
    found = images.generations(needed_specs(None))
    assert len(found) == 2 and [s.name for s in found[0]] == ["base"]
    assert {s.name for s in found[1]} == {s.name for s in images.SPECS} - {"base"}
    child = images.ImageSpec("agent-child", "agents/child", parent="agent-null")
    names = [[s.name for s in g] for g in images.generations([*images.SPECS[:2], child])]
    assert names == [["base"], ["agent-null"], ["agent-child"]]


def test_make_demo_does_not_build_every_image() -> None:
    done = subprocess.run(["make", "-n", "--no-print-directory", "demo"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "ispm demo" in done.stdout and "ispm images" not in done.stdout
    images_target = subprocess.run(["make", "-n", "--no-print-directory", "images"], cwd=ROOT, capture_output=True,
                                   text=True)  # fmt: skip
    assert "ispm images" in images_target.stdout


@pytest.mark.parametrize("agent", ["replay", "null"])
def test_the_demo_ensures_only_its_agent(agent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "ensure_images", asked)
    with pytest.raises(Named) as info:
        pipeline.run_calibration(agent, tasks=["ispm-001"])  # type: ignore[arg-type]
    assert info.value.args == ([f"agent-{agent}"],)


@pytest.mark.parametrize(
    ("given", "name"), [("mini-swe-agent", "agent-mini-swe-agent"), ("agent-reference", "agent-reference")]
)
def test_a_run_ensures_the_agent_it_names(given: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "ensure_images", asked)
    spec = RunSpec(agent_image=given, candidate="openai/gpt-4.1", judges=("ref#1", "ref#2"), backend="docker")
    with pytest.raises(Named) as info:
        pipeline.image_ids(spec)
    assert info.value.args == ([name],)


def test_a_run_of_an_image_that_is_not_ours_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "ensure_images", asked)
    monkeypatch.setattr(pipeline, "engine_image_id", lambda tag: None)
    spec = RunSpec(agent_image="me/agent:1", candidate="openai/gpt-4.1", judges=("ref#1", "ref#2"), backend="docker")
    assert pipeline.image_ids(spec) == {}
    assert pipeline.image_ids(calibration_spec("replay", backend="local")) == {}


@pytest.mark.docker
def test_ensuring_one_image_builds_it_and_its_parent_and_keeps_the_record(refs: dict[str, ImageRef]) -> None:
    client = docker.from_env()
    try:
        ensured = ensure_images(client, names=["agent-null"])
    finally:
        client.close()
    assert set(ensured) == {"base", "agent-null"}
    assert ensured["agent-null"].tag == refs["agent-null"].tag and not ensured["agent-null"].built
    # What was recorded of the other images before stays: the record is what this checkout has built.
    assert set(images.load_record()) == set(refs)
