"""Evaluation's commands: ``agon eval``, ``agon plot``, ``agon probe`` (``agon_env.cli`` names them)."""
