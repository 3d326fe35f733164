"""Training's command, ``agon train`` (``agon_env.cli`` names it)."""
