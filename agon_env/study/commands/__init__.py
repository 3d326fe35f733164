"""The study's command, ``agon study`` and its subcommand table (``agon_env.cli`` names it)."""
