"""Serving's commands: ``agon answer``, ``agon serve``, ``agon export`` (``agon_env.cli`` names them)."""
