"""The option dataclasses every layer reads: the env's keywords, how a policy samples, and
the latent channel's settings.

They sit at the floor, under envs, agents and training alike, so that a run's config
(:mod:`agon_env.config`) and its resolution (:mod:`agon_env.resolved`) can hold them
without importing the layers that act on them. Each is defined here once; the env
(:class:`~agon_env.envs.draft_challenge.DraftChallengeEnv`), the agents
(:mod:`agon_env.agents.protocol`) and the latent agents (:mod:`agon_env.agents.latent`)
import them from here. Torch-free and import-free (within the package).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass
class EnvOptions:
    """Every keyword of the env, with its default: the one list of them.

    ``agon_env.make`` routes these names to the env and the rest to the task
    (:data:`ENV_KWARGS`), ``spawn`` passes them on, a run's config has an ``env.<name>`` key
    and an ``agon train --env.<name>`` flag for each but ``mode`` and ``reward_scheme``
    (the algorithm picks those), and evaluation keeps them away from the task. So a new
    keyword is one field here, read in the env as ``self.<name>`` (docs/envs.md).
    """

    mode: str = "challenge"
    """Which game: ``challenge``, ``solo`` or ``self`` (the env's ``MODES``)."""
    reward_scheme: str = "conversion"
    """The challenger's reward (:mod:`agon_env.envs.rewards`): ``conversion`` (the paper's),
    ``coop``, ``margin``."""
    lam: float = 0.5
    """Format weight λ in every reward scheme (the paper's 0.5)."""
    gamma: float | None = None
    """Length tiebreak γ: bonus to the shorter of two correct traces (None = off). Works with any algo."""
    max_text_length: int = 65536
    """Longest observation or completion in characters (the text spaces' bound)."""
    render_mode: str | None = None
    """``ansi`` (``render()`` returns the text), ``human`` (prints it) or None."""
    tiebreak_drafter: bool = False
    """Let the drafter earn γ too; off keeps its reward free of rival terms (plain GRPO)."""
    exchange: str = "summary"
    """What the challenger is shown of the draft: a row of :data:`~agon_env.envs.exchange.CHANNELS`
    (``summary``, the paper's; ``redacted``, ``trace``, ``none``, ``latent``)."""


ENV_KWARGS = frozenset(f.name for f in fields(EnvOptions))
"""The keywords ``agon_env.make`` gives the env rather than the task."""


@dataclass
class SamplingParams:
    """How to sample completions; the defaults are the embedded default run's.

    The one description of how to sample, shared by training (``TrainConfig.sampling``),
    evaluation and both generation backends."""

    temperature: float = 0.7
    """Softmax temperature; 0 means greedy. Log-probs are taken at the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling mass (1 disables it)."""
    top_k: int = 0
    """Keep only the k most likely tokens (0 disables it)."""
    min_p: float = 0.0
    """Drop the tokens less likely than ``min_p`` times the most likely one, after temperature
    (0 disables it; vLLM's ``min_p``)."""
    repetition_penalty: float = 1.0
    """Tokens already in the prompt or the completion get their positive logits divided by it and
    their negative ones multiplied (1 disables it; vLLM's and transformers' ``repetition_penalty``)."""
    min_tokens: int = 0
    """EOS and ``stop_token_ids`` are masked, and stop strings not looked for, until the completion
    holds this many tokens (vLLM's ``min_tokens``)."""
    ignore_eos: bool = False
    """EOS does not end a completion: it runs to ``max_new_tokens``, a stop string or a stop token."""
    stop_token_ids: tuple[int, ...] = ()
    """Tokens that end a completion as EOS does (kept in it)."""
    top_logprobs: int = 0
    """At each step, also report this many of the most likely tokens with their log-probs, under
    the distribution the token was drawn from (``Completion.top_logprobs``; vLLM's ``logprobs``,
    OpenAI's ``top_logprobs``). 0: only the sampled token's."""
    max_new_tokens: int = 80
    """Hard cap per completion (``finish_reason="length"`` when hit); also the Dr. GRPO normaliser.

    80 fits a well-formed challenge on arith (~45-55 tokens); at 48 a third were cut off."""
    stop: tuple[str, ...] = ("</answer>",)
    """Strings that end a completion (kept in it). EOS ends one too, unless ``ignore_eos``."""
    stop_after: str | None = None
    """Stop strings count only after this marker: ``"</think>"`` for thinking models, so an
    ``</answer>`` written while thinking does not end the turn (``None``: anywhere)."""
    seed: int | None = None
    """Seed of one call's batch generator when the caller passes no per-row seeds (an agent or
    backend used on its own). Training and ``agon eval`` always pass per-row seeds
    (:mod:`agon_env.seeding`), which take precedence; ``None`` draws from torch's global RNG."""
    max_batch_size: int = 32
    """Larger batches are split into chunks of at most this many prompts (memory, not results)."""
    max_batch_tokens: int | None = None
    """Optional cap on ``rows * (longest prompt + max_new_tokens)`` per chunk (KV memory)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.min_tokens < 0:  # above max_new_tokens it masks EOS for the whole completion
            raise ValueError(f"min_tokens must be >= 0, got {self.min_tokens}")
        self.stop_token_ids = tuple(int(t) for t in self.stop_token_ids)
        if self.top_logprobs < 0:
            raise ValueError(f"top_logprobs must be >= 0, got {self.top_logprobs}")
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {self.max_batch_size}")
        if isinstance(self.stop, str):
            self.stop = (self.stop,)
        self.stop = tuple(s for s in self.stop if s)


@dataclass
class LatentConfig:
    """How the ``latent`` exchange conditions the challenger on its paired draft's KV cache
    (the spans are :data:`agon_env.agents.latent_spans.SPANS`)."""

    span: str = "summary"
    """Which draft tokens, encoded how: ``summary`` (its summary block, in a forward pass of its
    own: the cache carries the summary only), ``summary-in-context`` (the same tokens encoded
    within the whole draft: they carry its reasoning too) or ``completion`` (all of it up to
    the answer block, in context); see :data:`~agon_env.agents.latent_spans.SPANS`."""
    max_tokens: int = 256
    """Keep at most this many tokens of a span (its last ones): bounds a stored cache at
    ``max_tokens`` × bytes per token (SmolLM2-135M fp32: 46 KB per token, 11.8 MB per turn)."""
    layers: list[int] = field(default_factory=list)
    """Layers whose attention reads the draft's cache (KVComm-style selection; empty: all).
    At the other layers the challenger attends only to its own prompt."""
