"""One run's samples across many Docker hosts, on a Ray cluster (``ispm run --backend ray``).

The driver (the machine that runs ``ispm run``) keeps everything that decides a score: the journal, grading,
the judges, the record and the report. The cluster runs samples, nothing else:

- :mod:`.model`: what crosses the wire between driver and nodes (expectations, a node's check, a sample's result).
- :mod:`.images`: ``docker save`` streams in chunks out of the driver, ``docker load`` on a node, id checks.
- :mod:`.node`: the per-node agent, one Ray actor per node and run: the node's checks, its model gateway (with the
  node's own provider keys), its image loads and its orphan sweep.
- :mod:`.sample`: the Ray task that runs one sample with today's ``DockerBackend`` on the node it lands on.
- :mod:`.driver`: :class:`~runner.cluster.driver.RayRunner`, the scheduler's way to run samples on the cluster,
  with a sample tried again when a try is lost with its node, and a stop of the run when every node it admitted is gone.
- :mod:`.loopback`: a cluster on this machine's loopback, for the tests and ``bench/ray.py``.

Each node advertises ``ispm_sandbox`` units (``ray start --resources '{"ispm_sandbox": 4}'``), one per sandbox it
can hold; each sample task needs one. See the README, "More than one machine".
"""

SANDBOX_RESOURCE = "ispm_sandbox"
"""The custom Ray resource a sample task needs one unit of."""
NAMESPACE = "ispm"
"""The Ray namespace of the per-node agents, so a sample task finds its node's agent by name."""


def agent_name(run_id: str, attempt: str, node_id: str) -> str:
    """The Ray name of the agent on node ``node_id`` of the run ``run_id``'s attempt ``attempt``.

    An attempt's id is fresh at every start and resume: the agents of a driver killed with ``kill -9`` may still hold
    their names while the cluster notices, and must not block the resume's.
    """
    return f"ispm-node-{run_id}-{attempt}-{node_id}"
