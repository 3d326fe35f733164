"""The loss weights of a stream with dropped groups, hand-computed for every aggregation.

A kept sequence must weigh the same however many other groups were dropped, so the
normalisers count the whole stream (as TRL and Dr. GRPO do), not only the kept groups.
"""

from __future__ import annotations

import pytest
import torch

import agon_env
from agon_env.agents.protocol import Completion
from agon_env.algorithms.distributed import DistContext
from agon_env.algorithms.rollout import RolloutBatch
from agon_env.algorithms.update import Update
from agon_env.config import TrainConfig
from agon_env.episodes import Start, play_episodes

LENGTHS = [2, 3, 4, 5]  # completion tokens of episodes 0..3
MAX_NEW = 10


class ByEpisode:
    """Episode 0 answers right, the others wrong; episode i writes LENGTHS[i] tokens."""

    name = "agent_a"

    def act(self, observations, *, seeds=None):
        out = []
        for i in seeds:
            answer = "2" if i == 0 else "3"
            ids = list(range(LENGTHS[i]))
            text = f"<summary>s</summary><answer>{answer}</answer>"
            out.append(
                Completion(
                    text, prompt_ids=[7, 8], completion_ids=ids, logprobs=[-1.0] * len(ids), temperature=1.0
                )
            )
        return out


def stream_weights(aggregation: str) -> tuple[torch.Tensor, list[int]]:
    env = agon_env.make("agon/math-v0", problems=[{"question": "1 + 1?", "answer": "2"}] * 2, mode="solo")
    starts = [Start(i // 2, "agent_a", 0) for i in range(4)]  # 2 groups × N = 2
    played = play_episodes(env, {"agent_a": ByEpisode()}, starts, lambda i, seat, turn: i)
    batch = RolloutBatch([0, 1], 2, played.episodes)
    cfg = TrainConfig()
    cfg.grpo.aggregation = aggregation
    cfg.sampling.max_new_tokens = MAX_NEW
    update = Update(None, cfg.grpo, cfg.sampling.max_new_tokens, cfg.model.max_seq_len, DistContext())
    sb, keep = update.stream(batch, "drafter")
    assert keep.tolist() == [True, False]  # group 1 (both wrong) has no reward variance
    return sb.weights, [len(t.completion.completion_ids) for t in sb.turns]


@pytest.mark.parametrize(
    ("aggregation", "per_token"),
    [
        ("seq-mean", lambda length: 1 / (length * 4)),  # 1 / (own length × all 4 sequences)
        ("token-mean", lambda length: 1 / sum(LENGTHS)),  # 1 / all 14 tokens of the stream
        ("dr-grpo", lambda length: 1 / (4 * MAX_NEW)),  # 1 / (4 sequences × budget)
    ],
)
def test_kept_weights_count_the_whole_stream(aggregation, per_token):
    weights, lengths = stream_weights(aggregation)
    assert sorted(lengths) == [2, 3]  # only group 0's two sequences are kept
    for row, length in zip(weights, lengths, strict=True):
        assert torch.allclose(row[:length], torch.full((length,), per_token(length)))
        assert torch.all(row[length:] == 0)
