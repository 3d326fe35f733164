"""Streaming a batch token by token (agents/streaming.py, the HF backend's ``stream``): each row's
pieces arrive while the loop decodes and join to exactly the completion's text."""

from __future__ import annotations

from collections import defaultdict

from agon_env.agents.hf_backend import HFBackend
from agon_env.agents.llm_agent import LLMAgent
from agon_env.agents.protocol import SamplingParams
from agon_env.agents.streaming import TextDeltas

PROMPTS = ["What is 3 + 4?", "Verify the draft and re-derive the result.", "hi", "0 1 2", "a b"]


def streamed(backend, prompts, params, **how):
    pieces: dict[int, list[str]] = defaultdict(list)
    outs = backend.generate(prompts, params, stream=lambda row, text: pieces[row].append(text), **how)
    return outs, pieces


def test_each_row_streams_piece_by_piece_and_the_pieces_join_to_its_text(tiny_pair):
    backend = HFBackend(tiny_pair)
    # sampled, two rows a sub-batch (rows of later sub-batches keep their prompt's index), a stop string
    params = SamplingParams(max_new_tokens=20, temperature=1.0, stop=("e",), max_batch_size=2)
    outs, pieces = streamed(backend, PROMPTS, params, adapter="agent_a", seeds=[5, 6, 7, 8, 9])
    assert set(pieces) <= set(range(len(PROMPTS)))
    for row, out in enumerate(outs):
        assert "".join(pieces[row]) == out.text
        assert all(pieces[row])  # no empty pieces
    # token by token, not a row at once (a piece waits only while a character is split across tokens)
    longest = max(range(len(outs)), key=lambda row: len(outs[row].completion_ids))
    assert len(outs[longest].completion_ids) > 10 and len(pieces[longest]) > 5
    # streaming changes nothing of what is generated
    plain = backend.generate(PROMPTS, params, adapter="agent_a", seeds=[5, 6, 7, 8, 9])
    assert [o.completion_ids for o in plain] == [o.completion_ids for o in outs]


def test_the_first_piece_arrives_while_the_row_is_still_generating(tiny_pair):
    backend = HFBackend(tiny_pair)
    forwards: list[int] = []
    heard_after: list[int] = []  # how many forward passes had run when each piece came
    hook = tiny_pair.model.register_forward_hook(lambda *_: forwards.append(1))
    try:
        params = SamplingParams(max_new_tokens=12, temperature=0, stop=())
        hear = lambda row, t: heard_after.append(len(forwards))  # noqa: E731
        out = backend.generate(["What is 3 + 4?"], params, adapter="agent_a", stream=hear)[0]
    finally:
        hook.remove()
    assert len(out.completion_ids) == 12 and heard_after
    assert heard_after[0] < len(forwards)  # the first piece came before the last decode step, not at the end


def test_a_character_split_across_tokens_is_sent_whole(tiny_base):
    tok = tiny_base.tokenizer
    text = "héllo 😀 wörld"
    pieces: list[str] = []
    deltas = TextDeltas(tok, lambda row, t: pieces.append(t))
    for token in tok(text, add_special_tokens=False)["input_ids"]:
        deltas.add(0, [token])
    deltas.finish(0)
    assert "".join(pieces) == text and not any("\ufffd" in p for p in pieces)
    assert len(pieces) > 5


def test_an_agent_passes_stream_to_its_backend_only_when_asked(tiny_pair):
    class Plain:
        """A backend that does not stream: an agent not asked to stream still works with it."""

        def generate(self, prompts, params=None, adapter=None, seeds=None):
            return HFBackend(tiny_pair).generate(prompts, params, adapter, seeds)

    params = SamplingParams(max_new_tokens=6, temperature=0, stop=())
    obs = [{"text": "What is 3 + 4?", "problem": "What is 3 + 4?", "draft": "", "role": 0}]
    agent = LLMAgent("agent_a", tiny_pair, backend=Plain(), sampling=params)
    assert agent.act(obs)[0].text
    heard: list[tuple[int, str]] = []
    streaming = LLMAgent("agent_a", tiny_pair, sampling=params)
    out = streaming.act(obs, stream=lambda row, t: heard.append((row, t)))
    assert "".join(t for _, t in heard) == out[0].text and {r for r, _ in heard} == {0}
