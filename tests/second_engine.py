"""The tests' name for :mod:`runner.sandbox.docker.spare`: a second, empty Docker engine the test starts and removes."""

from runner.sandbox.docker.spare import Engine
from runner.sandbox.docker.spare import spare_engine as second_engine

__all__ = ["Engine", "second_engine"]
