"""The league's command: ``agon league`` (``agon_env.cli`` names it; ``agon study league`` reuses it)."""
