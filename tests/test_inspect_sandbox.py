"""The ``ispm`` Inspect sandbox provider against Inspect's own conformance suite, on the real engine.

Every check of ``inspect_ai.util._sandbox.self_check`` runs against one shared session (the suite's own advice for
a costly sandbox: a function-scoped ``sandbox_env`` over a module-scoped one). Each check the lockdown cannot pass
is a strict xfail with its reason, as the README's "From Inspect" lists them.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import anyio
import pytest
from inspect_ai.util import OutputLimitExceededError, SandboxEnvironment, SandboxUserUnsupportedError
from inspect_ai.util._sandbox.limits import override_max_exec_output_size
from inspect_ai.util._sandbox.self_check import *  # noqa: F403  # the suite's checks, collected here

from runner.inspect_eval.sandbox import IspmSandboxConfig, IspmSandboxEnvironment
from runner.sandbox.docker.session import SandboxSession, SessionSpec
from runner.sandbox.images import ImageRef

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

RUN_ID = f"inspect-selfcheck-{secrets.token_hex(3)}"

XFAILS = {
    "test_exec_as_user": "adding a user needs root and a writable /etc; the ispm sandbox has a read-only root and runs "
    "every command as the agent (uid 10001), refusing user='root' with SandboxUserUnsupportedError",
}
"""The checks the lockdown cannot pass, with why; the README's "From Inspect" names the same."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def shared_session(refs: dict[str, ImageRef]) -> Iterator[SandboxSession]:
    session = SandboxSession(SessionSpec(session_id="self-check", run_id=RUN_ID, image=refs["base"].tag))
    yield session
    session.remove()


@pytest.fixture
def sandbox_env(request: pytest.FixtureRequest, shared_session: SandboxSession) -> SandboxEnvironment:
    reason = XFAILS.get(request.node.originalname)
    if reason is not None:
        request.node.add_marker(pytest.mark.xfail(reason=reason, strict=True))
    return IspmSandboxEnvironment(shared_session)


async def test_a_command_as_root_is_refused_as_unsupported(sandbox_env: SandboxEnvironment) -> None:
    with pytest.raises(SandboxUserUnsupportedError, match="uid 10001"):
        await sandbox_env.exec(["id"], user="root")


async def test_a_command_runs_as_the_agent_in_a_read_only_root_without_network(
    sandbox_env: SandboxEnvironment,
) -> None:
    result = await sandbox_env.exec(
        ["sh", "-c", "id -u; touch /etc/x 2>&1; cat /sys/class/net/*/operstate 2>/dev/null | wc -l; ls /world /docs"]
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "10001"
    assert "Read-only file system" in lines[1]
    assert lines[2] == "1"  # loopback only
    assert "ispm-crossvendor-v1.sqlite" in lines


async def test_a_timed_out_command_leaves_no_process_behind(sandbox_env: SandboxEnvironment) -> None:
    # The image has no ps, so the suite's own kill checks find nothing either way: look in /proc instead.
    marker = f"left-behind-{secrets.token_hex(6)}"
    with pytest.raises(TimeoutError):
        await sandbox_env.exec(["sh", "-c", f"sleep 30 & sleep 30 # {marker}\n:"], timeout=1)
    await anyio.sleep(0.5)
    scan = await sandbox_env.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"])
    assert "sleep 30" not in scan.stdout
    assert "sleep infinity" in scan.stdout  # the keeper: the scan does see the container's processes


async def test_a_command_printing_past_inspects_output_limit_is_cut_off_with_its_error(
    sandbox_env: SandboxEnvironment,
) -> None:
    with override_max_exec_output_size(64 * 1024), pytest.raises(OutputLimitExceededError) as raised:
        await sandbox_env.exec(["sh", "-c", "yes leak | head -c 50000000"], timeout=30)
    assert raised.value.truncated_output is not None
    assert len(raised.value.truncated_output) == 64 * 1024  # the host read up to the limit and no further
    after = await sandbox_env.exec(["echo", "still here"])
    assert after.stdout == "still here\n"


async def test_a_sample_naming_a_task_gets_its_task_folder_and_one_without_gets_none(
    refs: dict[str, ImageRef],
) -> None:
    config = IspmSandboxConfig(image=refs["base"].tag, run_id=RUN_ID)
    with_task = await IspmSandboxEnvironment.sample_init("t", config, {"task_id": "ispm-001"})
    without = await IspmSandboxEnvironment.sample_init("t", None, {})  # sandbox="ispm", no config
    try:
        task_json = await with_task["default"].read_file("/task/task.json")
        listing = await without["default"].exec(["ls", "/task", "/docs"])
    finally:
        await IspmSandboxEnvironment.sample_cleanup("t", config, with_task, False)
        await IspmSandboxEnvironment.sample_cleanup("t", None, without, False)
    assert '"task_id": "ispm-001"' in task_json
    assert listing.stdout.startswith("/docs:\natlas.md\n")
    assert listing.stdout.endswith("\n/task:\n")  # the image's empty mount point: nothing mounted there


async def test_a_sample_naming_an_unknown_task_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="ispm-999"):
        await IspmSandboxEnvironment.sample_init("t", None, {"task_id": "ispm-999"})
