"""The trained pair as a two-stage cascade you can call: draft, then answer after reading the draft.

``Cascade.from_run(RUN)`` loads a run folder as ``agon eval`` does (its resolved run, its adapters on
one shared base, each adapter's own sampling, the run's prompt family, chat template and exchange
channel) and plays the user's questions through the run's own env in ``challenge`` mode: a
:class:`QuestionTask` holds the questions, :func:`agon_env.episodes.play_episodes` seats the drafter
and the challenger, and the env words what the challenger reads (:mod:`agon_env.envs.exchange`) and
hides a thinking model's ``<think>`` from it (:mod:`agon_env.envs.format`). Nothing of that is
re-implemented here, so what the challenger is shown is what it was shown in training and in
``agon eval``'s cascade (``tests/serving/test_cascade.py`` checks the text is identical).

The direction (who drafts) is the one ``agon eval`` chose on validation (``eval/eval.json``'s
``selection.chosen``), or given. One lever: on a channel that shows only the summary
(:attr:`~agon_env.envs.exchange.Channel.summary_only`) the draft stops at ``</summary>``, since the
challenger never reads the answer block (``early_stop``; docs/serving.md has its measured effect).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agon_env.envs.exchange import CHANNELS, SUMMARY_CLOSE
from agon_env.envs.tasks.base import ListTask, Problem
from agon_env.episodes import Episode, Start, play_episodes
from agon_env.evaluation.methods import method_of
from agon_env.evaluation.report_file import EvalReportError, read_eval_report
from agon_env.registry import make
from agon_env.resolved import ResolvedRun
from agon_env.run_folder import RunFolder
from agon_env.runtime import BACKENDS, BackendError, RunOnDisk, Runtime, model_window, pick_backend
from agon_env.seeding import derive_seed
from agon_env.serving.errors import CascadeError, QuestionError
from agon_env.vocabulary import AGENT_A, AGENT_B


class QuestionTask(ListTask):
    """User questions as a task, prompted with the run's family (``prompt_family``).

    A question may carry a reference answer; it is scored by the run's own task (``reference``),
    so ``correct`` means what it means in training. A question without one is never scored:
    :attr:`CascadeAnswer.correct` is then ``None``, whatever the env's verdict field holds."""

    name = "questions"

    def __init__(self, problems: Sequence[Problem], prompt_family: str, reference: Any = None) -> None:
        super().__init__(problems)
        self.prompt_family = prompt_family
        self.reference = reference

    def score(self, problem: Problem, answer: str) -> bool:
        if problem.answer is None or self.reference is None:
            return False  # unscored: CascadeAnswer reports correct=None for it
        return bool(self.reference.score(problem, answer))


@dataclass(frozen=True)
class Stage:
    """One turn of the cascade (or an adapter alone)."""

    adapter: str
    completion: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    """Wall time of this stage's batched generation call (shared by every question of the batch)."""
    finish_reason: str
    answer: str | None
    """What its ``<answer>`` block holds (``None``: none, or cut off)."""
    summary: str | None
    token_ids: tuple[int, ...] = ()
    """The completion's tokens, and their log-probs under the sampling that drew them (temperature
    and truncation applied): what the server returns for ``logprobs``."""
    token_logprobs: tuple[float, ...] = ()
    token_top: tuple[tuple[tuple[int, float], ...], ...] = ()
    """With ``top_logprobs``: each token's most likely alternatives, ``(token, log-prob)`` pairs."""

    def to_dict(self) -> dict[str, Any]:
        """Its fields but the per-token ones (a record, not the tokens)."""
        per_token = ("token_ids", "token_logprobs", "token_top")
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in per_token}


@dataclass(frozen=True)
class CascadeAnswer:
    """One question through the cascade: both stages and what passed between them."""

    question: str
    draft: Stage
    shown: str
    """What the challenger was shown of the draft (the env observation's ``draft``)."""
    challenger_text: str
    """The exact user turn the challenger read (the env observation's ``text``)."""
    challenge: Stage
    correct: bool | None = None
    """Scored against the question's reference answer by the run's task; ``None`` without one, or
    when the task could not judge the answer (its ``score`` raised or timed out): unjudged, not
    wrong (:func:`agon_env.stats.judged`)."""
    id: str = ""

    @property
    def answer(self) -> str | None:
        """The final answer: the challenger's ``<answer>`` block."""
        return self.challenge.answer

    def to_dict(self) -> dict[str, Any]:
        stages = {"draft": self.draft.to_dict(), "challenge": self.challenge.to_dict()}
        return {**dataclasses.asdict(self), **stages, "answer": self.answer}


@dataclass
class Cascade:
    """A run's trained pair: ``drafter`` drafts, ``challenger`` answers after reading the draft."""

    run: ResolvedRun
    agents: dict[str, Any]
    """Adapter name -> its agent (an :class:`~agon_env.agents.LLMAgent` with the run's sampling)."""
    direction: tuple[str, str]
    """(drafter, challenger) adapter names."""
    prompt_family: str
    reference: Any = None
    """The run's task, which scores questions that carry a reference answer."""
    early_stop: bool = True
    """Stop the draft at ``</summary>`` where the channel reads nothing after it."""
    seed: int = 0
    label: str = ""
    engine: str = "hf"
    """What generates: ``hf`` (transformers in-process) or ``vllm`` (one engine, both adapters)."""
    engine_window: int | None = None
    """The engine's own context limit where it sets one below the model's (vLLM's ``max_model_len``)."""
    continuous: bool = False
    """The engine batches calls made from several threads by itself (vLLM's async engine): a server
    sends each request at once instead of batching requests."""
    timings: list[dict[str, float]] = field(default_factory=list, repr=False)

    # -- building ------------------------------------------------------------------

    @classmethod
    def from_run(
        cls,
        run_dir: str | Path,
        *,
        direction: str | Sequence[str] | None = None,
        eval_report: str | Path | None = None,
        device: str | None = None,
        engine: str = "auto",
        early_stop: bool = True,
        seed: int = 0,
        continuous: bool = False,
    ) -> Cascade:
        """Load ``run_dir``: its resolved run, adapters and the direction ``agon eval`` chose.

        ``direction``: ``"agent_b>agent_a"`` (or a pair) overrides the recorded choice;
        ``eval_report``: an ``eval.json`` to read the choice from (default ``RUN/eval/eval.json``).
        ``engine``: ``hf`` (in-process), ``vllm`` (:mod:`agon_env.agents.vllm_backend`: one engine, both
        adapters as LoRA requests, each stage one ``generate`` call) or ``auto`` (:func:`pick_engine`).
        ``continuous``: on vLLM, its async engine (:mod:`agon_env.agents.vllm_async`), which batches
        calls from several threads continuously (a server's); HF generates one call at a time."""
        run_dir = Path(run_dir)
        disk = RunOnDisk.read(run_dir)  # the folder read once: resolved run, name, adapters
        run = disk.run
        channel = CHANNELS[run.exchange]
        if channel.cache:
            raise CascadeError(
                f"{run_dir}: its exchange channel {run.exchange!r} hands drafts over as a KV cache; "
                "the cascade serves text channels (agon eval --methods latent-cascade evaluates it)"
            )
        engine = pick_engine(engine, run.config.model.name)
        # Before any model is loaded: a missing direction is refused in a moment, not after a minute.
        pair = _direction(run_dir, disk.adapter_names, direction, eval_report)
        task = make(run.env_id, **run.task_kwargs).unwrapped.task
        from agon_env.agents.prompts import family_of, role_prompts

        prompts = role_prompts(task, run.config.prompts)
        runtime = Runtime(device or "auto", engine, continuous)  # this machine's, by training's rule
        base = runtime.base(run.config.model.name, runtime.dtype(run.config))
        loaded = runtime.load_adapters(base, disk.sources, run.config)
        _direction(run_dir, list(loaded), pair, None)  # the loaded adapters hold both
        agents = {
            name: runtime.agent(name, base, adapter, run, prompts) for name, (adapter, _) in loaded.items()
        }
        return cls(
            run,
            agents,
            pair,
            family_of(task, run.config.prompts.family),
            task,
            early_stop=early_stop,
            seed=seed,
            label=disk.name,
            engine=engine,
            engine_window=runtime.engine_window(base),
            continuous=runtime.continuous,
        )

    def close(self) -> None:
        """Stop the generation engine where it runs in processes of its own (vLLM's engine core)."""
        for backend in {
            id(a.backend): a.backend for a in self.agents.values() if hasattr(a, "backend")
        }.values():
            close = getattr(backend, "close", None)
            if callable(close):
                close()

    # -- what it reads ---------------------------------------------------------------

    @property
    def base(self) -> Any:
        return next(iter(self.agents.values())).base

    def env(self, questions: Sequence[Problem], mode: str = "challenge") -> Any:
        """The run's env over ``questions``: the run's keywords and reading channel."""
        task = QuestionTask(questions, self.prompt_family, self.reference)
        return make(
            self.run.env_id, task=task, mode=mode, exchange=self.run.exchange, **self.run.reader_options()
        )

    def window(self) -> int | None:
        """The context window in tokens: the model's, or the engine's where smaller (``None``: none)."""
        limits = [w for w in (model_window(self.base), self.engine_window) if w]
        return min(limits, default=None)

    def check(self, question: str, adapter: str | None = None, max_new_tokens: int | None = None) -> None:
        """Refuse, in one line (:class:`QuestionError`), a question the env or the model cannot take:
        empty, not valid Unicode, too long for the env's ``max_text_length``, or whose prompt and
        ``max_new_tokens`` overflow the model's window -- the drafting prompt, and for the cascade the
        challenger's too, with the longest summary the draft's budget allows (the challenger's prompt
        is the longer one: it adds its own examples and the draft; a batch the engine refuses fails
        every request in it). ``max_new_tokens``: the answering stage's budget where a request sets
        it (the drafter's alone, the challenger's in the cascade)."""
        if not isinstance(question, str) or not question.strip():
            raise QuestionError("the question is empty")
        try:
            question.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the tokenizer would raise a TypeError
            raise QuestionError("the question holds a lone surrogate (not valid Unicode)") from None
        env = self.env([Problem("q", question, None)], mode="solo" if adapter else "challenge")
        try:
            env.reset(seed=0, options={"problem_index": 0})
            observation = env.observe(AGENT_A)
        except ValueError as exc:
            raise QuestionError(str(exc)) from None
        agent = self.agents[adapter or self.direction[0]]
        self._fits(agent, observation, "the prompt", max_new_tokens if adapter else None)
        if adapter is None and max_new_tokens is not None and max_new_tokens < 2:
            raise QuestionError(
                f"max_tokens={max_new_tokens} bounds the draft and the answer together: "
                "the cascade needs at least 2 (a token for each)"
            )
        if adapter is None:
            budget = agent.sampling.max_new_tokens
            env.step(f"<summary>{' word' * budget}</summary>")  # about one token a word: the whole budget
            self._fits(
                self.agents[self.direction[1]],
                env.observe(env.agent_selection),
                f"the challenger's prompt, with a draft summary of {budget} tokens,",
                max_new_tokens,
            )

    def _fits(self, agent: Any, observation: Any, what: str, budget: int | None = None) -> None:
        tokens = len(self._counter()(agent.render(observation), add_special_tokens=False)["input_ids"])
        window, budget = self.window(), budget or agent.sampling.max_new_tokens
        if window is not None and tokens + budget > window:
            raise QuestionError(
                f"{what} is {tokens} tokens; with max_new_tokens={budget} that is over the model's "
                f"window of {window} tokens"
            )

    def _counter(self) -> Any:
        """A tokenizer of its own for :meth:`check`: a server checks requests while a batch generates,
        and a fast tokenizer used from two threads at once can fail ("Already borrowed")."""
        if "_tokenizer" not in self.__dict__:
            self.__dict__["_tokenizer"] = copy.deepcopy(self.base.tokenizer)
        return self.__dict__["_tokenizer"]

    # -- answering ------------------------------------------------------------------

    def _drafter(self) -> Any:
        agent = self.agents[self.direction[0]]
        sampling = getattr(agent, "sampling", None)  # an agent that does not sample has no stop strings
        if sampling is None or not (self.early_stop and CHANNELS[self.run.exchange].summary_only):
            return agent
        early = copy.copy(agent)
        stop = tuple(dict.fromkeys((*sampling.stop, SUMMARY_CLOSE)))
        early.sampling = dataclasses.replace(sampling, stop=stop)
        return early

    def _play(
        self,
        questions: Sequence[str],
        mode: str,
        seats: Mapping[str, Any],
        ids: Sequence[str],
        references: Sequence[Any],
        seeds: Sequence[int] | None = None,
        stream: Listener | None = None,
    ) -> tuple[list[Episode], dict[str, float]]:
        problems = [Problem(i, q, r) for i, q, r in zip(ids, questions, references, strict=True)]
        last = list(seats)[-1]  # the answering seat: the challenger, or the adapter alone
        timed = {
            seat: _Timed(agent, ANSWER if seat == last else DRAFT, stream) for seat, agent in seats.items()
        }
        roots = list(seeds) if seeds is not None else [self.seed] * len(questions)

        def seed_of(index: int, seat: str, turn: int) -> int:
            return derive_seed(roots[index], "answer", questions[index], timed[seat].name, turn)

        starts = [Start(i, AGENT_A, derive_seed(roots[i], "answer-episode", i)) for i in range(len(problems))]
        played = play_episodes(self.env(problems, mode), timed, starts, seed_of)
        return played.episodes, {seat: t.seconds for seat, t in timed.items()}

    def answer_many(
        self,
        questions: Sequence[str],
        ids: Sequence[str] | None = None,
        references: Sequence[Any] | None = None,
        *,
        sampling: Mapping[str, Any] | None = None,
        seeds: Sequence[int] | None = None,
        stream: Listener | None = None,
    ) -> list[CascadeAnswer]:
        """Each question drafted and then challenged; each stage is one batched call for all.

        ``sampling``: overrides of the challenger's sampling (:func:`tuned`; the draft keeps the
        run's, the format the challenger was trained to read), except two that bind both stages:
        ``temperature`` 0 makes the draft greedy too, and ``max_new_tokens`` bounds the draft and
        the answer together (:func:`budgeted`); ``seeds``: one root seed per question
        (default: ``self.seed`` for all); ``stream``: told ``(question index, DRAFT or ANSWER, text)``
        as each stage's tokens are generated (the server streams them; the agents' backend must
        stream, as :mod:`~agon_env.agents.hf_backend` does)."""
        if not questions:
            return []
        ids = list(ids) if ids is not None else [str(i) for i in range(len(questions))]
        refs = list(references) if references is not None else [None] * len(questions)
        drafter, challenger = self.direction
        seats = {AGENT_A: self._drafter(), AGENT_B: tuned(self.agents[challenger], sampling)}
        if sampling and sampling.get("temperature") == 0:  # greedy is greedy in both stages
            seats[AGENT_A] = tuned(seats[AGENT_A], {"temperature": 0.0})
        total = (sampling or {}).get("max_new_tokens")
        if total is not None:  # max_tokens bounds the whole completion: the draft spends first
            seats = budgeted(seats, int(total))
        episodes, seconds = self._play(questions, "challenge", seats, ids, refs, seeds, stream)
        out = []
        for e, q, ref in zip(episodes, questions, refs, strict=True):
            draft, challenge = e.draft, e.challenge
            assert challenge is not None  # challenge mode always plays the second turn
            out.append(
                CascadeAnswer(
                    question=q,
                    draft=_stage(draft, drafter, seconds[AGENT_A]),
                    shown=str(challenge.observation["draft"]),
                    challenger_text=str(challenge.observation["text"]),
                    challenge=_stage(challenge, challenger, seconds[AGENT_B]),
                    correct=None if ref is None else challenge.verdict,
                    id=e.problem_id,
                )
            )
        self.timings.append({"draft": seconds[AGENT_A], "challenge": seconds[AGENT_B]})
        return out

    def answer(self, question: str, reference: Any = None) -> CascadeAnswer:
        """One question through the cascade (:meth:`answer_many` of one)."""
        return self.answer_many([question], references=[reference])[0]

    def alone_many(
        self,
        adapter: str,
        questions: Sequence[str],
        *,
        sampling: Mapping[str, Any] | None = None,
        seeds: Sequence[int] | None = None,
        stream: Listener | None = None,
    ) -> list[Stage]:
        """Each question answered by ``adapter`` alone (the env's ``solo`` mode: ``agon eval``'s
        standalone row); ``sampling``, ``seeds`` and ``stream`` (its one stage is ``ANSWER``) as in
        :meth:`answer_many`."""
        if adapter not in self.agents:
            raise CascadeError(f"no adapter {adapter!r} in this run; adapters: {sorted(self.agents)}")
        ids = [str(i) for i in range(len(questions))]
        seat = {AGENT_A: tuned(self.agents[adapter], sampling)}
        episodes, seconds = self._play(questions, "solo", seat, ids, [None] * len(questions), seeds, stream)
        return [_stage(e.draft, adapter, seconds[AGENT_A]) for e in episodes]


DRAFT, ANSWER = "draft", "answer"
"""The stages a :data:`Listener` hears: the cascade's draft, and the answer (the challenger's, or an
adapter's alone)."""
Listener = Callable[[int, str, str], None]
"""``(question index, stage, text)``: the next piece of that question's stage, as it is generated."""

ENGINES = ("auto", *BACKENDS)
"""What ``--engine`` (``--backend``) takes: :data:`agon_env.runtime.BACKENDS` or ``auto``."""


def pick_engine(engine: str, model: str) -> str:
    """``auto``: vLLM when it imports here and the model is a folder or Hub id it can load, else HF
    (:func:`agon_env.runtime.pick_backend`)."""
    try:
        return pick_backend(engine, model)
    except BackendError as exc:
        raise CascadeError(str(exc)) from None


def tuned(agent: Any, sampling: Mapping[str, Any] | None) -> Any:
    """``agent`` with its sampling overridden by ``sampling`` (a request's ``max_new_tokens``,
    ``temperature``, ``top_p``; its ``stop`` strings are added to the agent's own, which the run's
    answer format needs). The agent itself is unchanged: a copy answers."""
    if not sampling or getattr(agent, "sampling", None) is None:
        return agent
    changes = dict(sampling)
    if "stop" in changes:
        changes["stop"] = tuple(dict.fromkeys((*agent.sampling.stop, *changes["stop"])))
    copied = copy.copy(agent)
    copied.sampling = dataclasses.replace(agent.sampling, **changes)
    return copied


def budgeted(seats: Mapping[str, Any], total: int) -> dict[str, Any]:
    """The drafter and the challenger seats of ``seats`` sharing ``total`` completion tokens: the
    draft gets at most ``total - 1`` (and no more than its own budget), each answer what its
    question's draft left (``Stage.completion_tokens`` of both add up to at most ``total``)."""
    drafter, challenger = (seats[AGENT_A], seats[AGENT_B])
    own = getattr(getattr(drafter, "sampling", None), "max_new_tokens", total)
    spent = _Spent(tuned(drafter, {"max_new_tokens": max(1, min(own, total - 1))}))
    return {AGENT_A: spent, AGENT_B: _Left(challenger, total, spent)}


class _Spent:
    """The drafter, counting each row's draft tokens (row ``i`` is question ``i``)."""

    def __init__(self, agent: Any) -> None:
        self.agent, self.name, self.sampling = agent, agent.name, getattr(agent, "sampling", None)
        self.tokens: list[int] = []

    def act(self, observations: Sequence[Mapping[str, Any]], **how: Any) -> list[Any]:
        out = self.agent.act(observations, **how)
        self.tokens = [len(getattr(c, "completion_ids", []) or []) for c in out]
        return out


class _Left:
    """The challenger, each row with the budget its draft left: one call per distinct budget (one
    call in all for a server's request, which asks one question)."""

    def __init__(self, agent: Any, total: int, spent: _Spent) -> None:
        self.agent, self.name, self.total, self.spent = agent, agent.name, total, spent
        self.sampling = getattr(agent, "sampling", None)

    def act(
        self,
        observations: Sequence[Mapping[str, Any]],
        *,
        seeds: Sequence[int] | None = None,
        stream: Callable[[int, str], None] | None = None,
    ) -> list[Any]:
        rows: dict[int, list[int]] = {}
        for i in range(len(observations)):
            rows.setdefault(max(1, self.total - self.spent.tokens[i]), []).append(i)
        out: list[Any] = [None] * len(observations)
        for left, idx in rows.items():
            how: dict[str, Any] = {} if seeds is None else {"seeds": [seeds[i] for i in idx]}
            if stream is not None:
                how["stream"] = lambda row, text, idx=idx: stream(idx[row], text)
            agent = tuned(self.agent, {"max_new_tokens": left})
            for i, c in zip(idx, agent.act([observations[i] for i in idx], **how), strict=True):
                out[i] = c
        return out


class _Timed:
    """An agent that records how long its (one, batched) act call took, and streams its text to
    ``stream`` as ``stage``. A cascade's every episode plays each seat once, all in one call, so
    row ``i`` of that call is question ``i``."""

    def __init__(self, agent: Any, stage: str, stream: Listener | None = None) -> None:
        self.agent, self.name, self.seconds, self.stage, self.stream = agent, agent.name, 0.0, stage, stream

    def act(
        self, observations: Sequence[Mapping[str, Any]], *, seeds: Sequence[int] | None = None
    ) -> list[Any]:
        t0 = time.perf_counter()
        listen, stage = self.stream, self.stage
        if listen is None:
            out = self.agent.act(observations, seeds=seeds)
        else:
            out = self.agent.act(observations, seeds=seeds, stream=lambda row, text: listen(row, stage, text))
        self.seconds += time.perf_counter() - t0
        return out


def _stage(turn: Any, adapter: str, seconds: float) -> Stage:
    c = turn.completion
    return Stage(
        adapter=adapter,
        completion=turn.text,
        prompt_tokens=len(getattr(c, "prompt_ids", []) or []),
        completion_tokens=int(turn.tokens or 0),
        seconds=seconds,
        finish_reason=str(getattr(c, "finish_reason", "stop")),
        answer=turn.answer,
        summary=turn.summary,
        token_ids=tuple(getattr(c, "completion_ids", None) or ()),
        token_logprobs=tuple(getattr(c, "logprobs", None) or ()),
        token_top=tuple(tuple(step) for step in getattr(c, "top_logprobs", None) or ()),
    )


def recorded_direction(run_dir: str | Path, eval_report: str | Path | None = None) -> str | None:
    """The cascade ``agon eval`` chose on validation for ``run_dir`` (``cascade:agent_b>agent_a``),
    read from ``eval_report`` (default: the run's ``eval/eval.json``); ``None`` when none is recorded."""
    path = Path(eval_report) if eval_report else RunFolder(Path(run_dir)).eval_report
    if not path.is_file():
        return None
    try:
        mine = read_eval_report(path).run_of(run_dir)
    except EvalReportError as exc:
        raise CascadeError(str(exc)) from None
    return mine.chosen if mine else None


def _direction(
    run_dir: Path, adapters: list[str], given: str | Sequence[str] | None, eval_report: str | Path | None
) -> tuple[str, str]:
    """(drafter, challenger): ``given``, else the validation choice; refused in one line when neither."""
    if given is None:
        chosen = recorded_direction(run_dir, eval_report)
        if chosen is None:
            where = eval_report or RunFolder(run_dir).eval_report
            raise CascadeError(
                f"{run_dir}: no cascade direction recorded ({where} has none); run `agon eval {run_dir}` "
                "to choose it on validation, or give one (--direction 'agent_a>agent_b')"
            )
        method = method_of(chosen, adapters)
        pair = tuple(method.policies) if method is not None else ()
    else:
        pair = tuple(given.split(">")) if isinstance(given, str) else tuple(given)
    if len(pair) != 2 or pair[0] == pair[1] or any(p not in adapters for p in pair):
        raise CascadeError(
            f"direction {'>'.join(pair) or given!r}: give two different adapters of the run as "
            f"DRAFTER>CHALLENGER; adapters: {', '.join(adapters)}"
        )
    return (str(pair[0]), str(pair[1]))
