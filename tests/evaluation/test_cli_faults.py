"""``agon probe`` and ``agon eval`` refuse impossible arguments in one line, before any work."""

from __future__ import annotations

import pytest

from agon_env.evaluation.commands.eval import eval_main
from agon_env.evaluation.commands.probe import run_probe_cli


@pytest.mark.parametrize("flags", [["--problems", "0"], ["--problems", "-2"], ["--samples", "0"]])
def test_probe_refuses_nothing_to_probe(flags, capsys, tmp_path) -> None:
    out = tmp_path / "probe.json"
    assert run_probe_cli(["--model", "tiny", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"agon probe: {flags[0]} {flags[1]}: the probe needs at least 1\n"
    assert not out.exists()


def test_eval_seeds_without_a_value_is_one_line(capsys, tmp_path) -> None:
    assert eval_main(["--model", "tiny", "--seeds", "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert err == "agon eval: --seeds: give at least one sampling seed, e.g. --seeds 0 or --seeds 0 1 2\n"
