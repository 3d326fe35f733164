"""``agon train --exchange latent``: both streams train, on-policy, and the run records its channel."""

from __future__ import annotations

import pytest
import torch
import yaml

from agon_env.algorithms.commands.train import main
from agon_env.run_folder import read_metrics

TINY = [
    "--model",
    "tiny",
    "--imports",
    "latent_parity_env",
    "--env",
    "test/parity-latent-v0",
    "--batch-problems",
    "2",
    "--n",
    "4",
    "--sampling.max-new-tokens",
    "4",
    "--no-progress",
    "--lr",
    "1e-2",
    "--threads",
    "1",
    "--heldout-problems",
    "0",
]


pytestmark = pytest.mark.usefixtures("parity_on_path")


def test_agon_train_exchange_latent_trains_both_streams(tmp_path):
    run = tmp_path / "run"
    args = [
        *TINY,
        "--steps",
        "2",
        "--exchange",
        "latent",
        "--latent.span",
        "completion",
        "--out-dir",
        str(run),
    ]
    assert main(args) == 0
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["env"]["exchange"] == "latent" and saved["latent"]["span"] == "completion"
    records = read_metrics(run)
    assert [r["step"] for r in records] == [0, 1]
    # Both role streams produced updates, the challenger's (sampled on its draft's cache) included,
    # and each update's sampler and trainer log-probs agreed to round-off (the on-policy guard).
    assert any(r["groups_dropped/challenger"] < 1 for r in records)
    assert any(r["groups_dropped/drafter"] < 1 for r in records)
    kls = {k: v for r in records for k, v in r.items() if k.startswith("onpolicy/kl/")}
    assert kls and all(v < 1e-6 for v in kls.values()), kls
    assert {k.split("/")[1] for r in records for k in r if k.startswith("loss/")} == {"agent_a", "agent_b"}
    # The stored caches are measured: B × N = 8 challenger turns of at most 4 tokens (the draft's
    # whole completion), at 2 layers × 2 × kv heads × head dim × 4 bytes per token for the tiny model.
    from agon_env.agents.models import load_base

    cfg = load_base("tiny")[0].config
    per_token = (
        2 * cfg.num_hidden_layers * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads) * 4
    )
    for r in records:
        assert 1 <= r["latent/tokens"] <= 4 and r["latent/bytes"] == 8 * r["latent/tokens"] * per_token


def test_agon_train_refuses_latent_with_vllm_in_one_line(tmp_path, capsys):
    args = [
        *TINY,
        "--steps",
        "1",
        "--exchange",
        "latent",
        "--model.backend",
        "vllm",
        "--out-dir",
        str(tmp_path / "r"),
    ]
    assert main(args) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vLLM cannot take an injected KV cache" in err[0]


def test_prompt_tokens_count_each_role_s_text_prompt_whatever_the_channel(tmp_path):
    # prompt_tokens/<role> counts the text prompt only (a latent reader's draft arrives as a cache);
    # the drafter's prompt does not depend on the channel. The tiny model writes no summary, so
    # which reader's prompt is shorter is left to the real model (issue #25's comparison).
    rows = {}
    for channel in ("summary", "latent"):
        run = tmp_path / channel
        assert main([*TINY, "--steps", "1", "--exchange", channel, "--out-dir", str(run)]) == 0
        rows[channel] = read_metrics(run)[0]
    assert rows["summary"]["prompt_tokens/drafter"] == rows["latent"]["prompt_tokens/drafter"] > 0
    assert rows["latent"]["prompt_tokens/challenger"] > 0 and rows["summary"]["prompt_tokens/challenger"] > 0


def test_latent_figures_by_hand():
    """Two challenger turns read 3 and 0 cached tokens (a draft without a summary), one text
    turn read none: tokens 1.5, empty 0.5, bytes = 2 (k, v) x 2 layers x 1 head x 3 x 4 dims x 4 B."""
    from types import SimpleNamespace

    from agon_env import metric_names as M
    from agon_env.agents.latent import PREFIX, LatentPrefix
    from agon_env.algorithms.latent_logprobs import latent_figures

    def turn(prefix):
        meta = {} if prefix is None else {PREFIX: prefix}
        return SimpleNamespace(completion=SimpleNamespace(meta=meta))

    kv = tuple(torch.zeros(1, 3, 4) for _ in range(2))
    turns = [turn(LatentPrefix(kv, kv, start=5)), turn(LatentPrefix((), (), start=0)), turn(None)]
    assert latent_figures(turns) == {M.LATENT_TOKENS: 1.5, M.LATENT_EMPTY: 0.5, M.LATENT_BYTES: 192.0}
    assert latent_figures([turn(None)]) == {}
