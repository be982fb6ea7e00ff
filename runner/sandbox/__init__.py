"""The sandbox: images, backends and the agent contract; the only package that knows Docker."""
