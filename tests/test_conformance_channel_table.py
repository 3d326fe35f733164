"""The conformance check reads what a channel shows from the channel table, so a new text
channel that shows no summary conforms without touching the check."""

from __future__ import annotations

import pytest

import agon_env
from agon_env.conformance import check_episode_contract
from agon_env.envs.exchange import CHANNELS, Channel


def test_a_text_channel_without_the_summary_conforms(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = Channel("plain-note", lambda problem, text, parsed: "check the arithmetic", summary=False)
    monkeypatch.setitem(CHANNELS, plain.name, plain)
    check_episode_contract(agon_env.make("agon/arith-v0", exchange=plain.name))
    # The same text, from a channel whose entry says it shows the summary, is caught.
    claims = Channel("claims-summary", lambda problem, text, parsed: "check the arithmetic")
    monkeypatch.setitem(CHANNELS, claims.name, claims)
    with pytest.raises(AssertionError, match="lacks the drafter's summary"):
        check_episode_contract(agon_env.make("agon/arith-v0", exchange=claims.name))
