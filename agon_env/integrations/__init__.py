"""The package's parts as other libraries' users take them, without adopting its trainer.

:mod:`agon_env.integrations.trl` scores TRL ``GRPOTrainer`` completions with a task's own
verifier or sandbox. Each integration imports its library only when used.
"""
