"""``agon envs`` and ``agon episode``: the package's own commands (``agon_env.cli`` names them)."""
