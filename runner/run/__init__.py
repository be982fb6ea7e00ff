"""Runs: the spec, the durable journal, the scheduler and the calibration (gold / null) runs."""
