"""The Docker backend, as a package: the engine, the ``/output`` volume, the streams, the two layouts.

- :mod:`.engine`: connecting, the sweep of labelled leftovers, engine errors as ``SandboxError``.
- :mod:`.volume`: the per-sample ``/output`` tmpfs volume.
- :mod:`.streams`: the agent's output tails and the forwarder's ready line.
- :mod:`.layout`, :mod:`.held`, :mod:`.keeper`: the two container layouts behind one protocol.
- :mod:`.backend`: :class:`DockerBackend`, which makes and removes a sample's resources.
- :mod:`.spare`: a spare, empty engine beside the host's, in its own network namespace (the cluster's tests, benches).

The threat model, the layouts and why each protection exists: docs/sandbox.md.
"""

from runner.sandbox.docker.backend import DockerBackend
from runner.sandbox.docker.engine import connect, engine_fault, engine_id, sweep

__all__ = ["DockerBackend", "connect", "engine_fault", "engine_id", "sweep"]
