"""The numbers docs/gpu.md, docs/paper.md and the README state about the GPU launchers are those they compose.

Review 3 (issue 37, finding 22): docs/gpu.md still said 12 agent-loop workers and 552 sandboxes after the launchers
moved to 24 workers and three measurement arms, and docs/paper.md gave the 30B rollout as TP 4 x DP 2 after it became
two replicas of TP 4. The memory table itself is the script's output (``test_engine_receives.py``); here every other
number is read out of the prose by the phrase that states it and compared with what the composed configs (and
``recipe.spade.gpu_memory`` on them) give, so a launcher change that moves a number fails until the doc follows.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from tensordict import TensorDict
from test_gpu_readiness import ENV, config_of, designer_episodes_per_sample, plan
from test_launchers import composed, dry_run

from recipe.spade.budget import designer_rows
from recipe.spade.gpu_memory import memory_report, peak_episodes

ROOT = Path(__file__).resolve().parents[2]


def prose(name: str) -> str:
    """The doc with its line breaks folded, so a phrase may wrap."""
    return " ".join((ROOT / name).read_text().split())


def claims(doc: str, pattern: str, *expected: object) -> None:
    """The doc states ``pattern`` with exactly these values, each written as ``str`` writes it."""
    match = re.search(pattern, doc)
    assert match, f"the doc no longer states {pattern!r}"
    assert match.groups() == tuple(str(v) for v in expected), pattern


def table(cfg, gpu_gib: float) -> dict[str, float | None]:
    """The numbers of ``memory_report`` that the prose repeats (None: not in this launcher's table)."""
    text = memory_report(cfg, gpu_gib)

    def num(pattern: str) -> float | None:
        match = re.search(pattern, text)
        return float(match.group(1)) if match else None

    return {
        "update": num(r"actor update peak per GPU: ([\d.]+) GiB"),
        "weights": num(r"vLLM weights\s+([\d.]+) GiB"),
        "kv": num(r"vLLM KV cache\s+([\d.]+) GiB"),
        "kv_kib": num(r"KV ([\d.]+) KiB per token"),
        "tokens": num(r"([\d.]+)M tokens per engine"),
        "sequences": num(r"= (\d+) sequences"),
        "engines": num(r"(\d+) replica\(s\)") * num(r"x (\d+) engine\(s\)"),
        "adam": num(r"Adam \(fp32 master, m, v\)\s+([\d.]+) GiB"),
        "checkpoint": num(r"checkpoint: (\d+) GiB each"),
        "disk": num(r"= (\d+) GiB of disk"),
        "written": num(r"saves write ([\d.]+) TiB"),
    }


def step_shape(cfg) -> dict[str, int]:
    """A regeneration step's rows, episodes and agent-loop workers, as the launcher composes them."""
    n, rows = cfg.actor_rollout_ref.rollout.n, cfg.data.train_batch_size
    designers = designer_rows(cfg.spade, n)
    per_sample = designer_episodes_per_sample(cfg)
    workers = cfg.actor_rollout_ref.rollout.agent.num_workers
    default_chunk = len(TensorDict({"r": list(range(rows))}, batch_size=[rows]).chunk(8)[0])  # verl's 8 workers
    return {"rows": rows, "designers": designers, "agents": rows - designers, "n": n, "per_sample": per_sample,
            "per_row": n * per_sample, "rows_per_worker": math.ceil(rows / workers), "workers": workers,
            "default_chunk": default_chunk, "default_designers": min(default_chunk, designers),
            "measurement": designers * n * per_sample, "agent_episodes": (rows - designers) * n,
            "episodes": peak_episodes(cfg)}  # fmt: skip


@pytest.mark.parametrize("script", ["run_spade_30b.sh", "run_spade_8b.sh"])
def test_gpu_doc_states_the_composed_workers_and_sandboxes(script):
    doc, s = prose("docs/gpu.md"), step_shape(config_of(script))
    claims(doc, r"30B and 8B: (\d+) rows \((\d+) designer rows \+ (\d+) agent rows\), (\d+) x (\d+) = (\d+) episodes "
                r"per designer row, (\d+) rows? per worker, \*\*(\d+) workers\*\*",
           s["rows"], s["designers"], s["agents"], s["n"], s["per_sample"], s["per_row"], s["rows_per_worker"],
           s["workers"])  # fmt: skip
    claims(doc, r"default of 8 workers would put (\d+) rows, (\d+) designer rows \((\d+) episodes\)",
           s["default_chunk"], s["default_designers"], s["default_designers"] * s["per_row"])  # fmt: skip
    claims(
        doc,
        r"at most (\d+) designer rows x (\d+) samples x (\d+) plays = (\d+) measurement episodes plus (\d+) agent "
        r"rows x (\d+) = (\d+) agent episodes at once, (\d+) processes across (\d+) agent-loop workers: about "
        r"([\d.]+) GiB",
        s["designers"],
        s["n"],
        s["per_sample"],
        s["measurement"],
        s["agents"],
        s["n"],
        s["agent_episodes"],
        s["episodes"],
        s["workers"],
        f"{s['episodes'] * 31 / 1024:.1f}",
    )  # fmt: skip  (31 MB a sandbox)
    claims(doc, r"against at most (\d+) episodes in flight per step", s["episodes"])


def test_gpu_doc_states_the_vllm_requests_and_the_entropy_memory():
    doc, big = prose("docs/gpu.md"), config_of("run_spade_30b.sh")
    s, rollout = step_shape(big), big.actor_rollout_ref.rollout
    engines = 8 // rollout.tensor_model_parallel_size
    per_engine = math.ceil(s["episodes"] / engines)
    claims(doc, r"(\d+) measurement plays \((\d+) arms x (\d+) plays x (\d+) designs\) and (\d+) agent episodes, (\d+) "
                r"requests\. .* each of the 30B's two engines holds (\d+)\. verl's default `rollout.max_num_seqs` of "
                r"256 would keep (\d+) of them waiting per engine",
           s["measurement"], s["per_sample"] // big.spade.plays_per_arm, big.spade.plays_per_arm,
           s["designers"] * s["n"], s["agent_episodes"], s["episodes"], per_engine, per_engine - 256)  # fmt: skip
    small = [config_of(f"run_spade_{size}.sh").actor_rollout_ref.rollout.max_num_seqs for size in ("8b", "4b")]
    claims(doc, r"never below 256: (\d+) at 30B, (\d+) at 8B \(four engines\) and 4B \(eight\)",
           rollout.max_num_seqs, small[0])  # fmt: skip
    assert rollout.max_num_seqs == per_engine and small[0] == small[1] == 256
    claims(doc, r"it holds about (\d+) sequences of the full 32,768 tokens", f"{table(big, 79.2)['sequences']:.0f}")
    config_name, overrides = plan("run_spade_8b.sh")
    whole = composed(config_name, [*overrides, "actor_rollout_ref.actor.entropy_from_logits_with_chunking=false"])

    def entropy(cfg) -> float:
        line = next(ln for ln in memory_report(cfg, 79.2).splitlines() if "log-prob pass: entropy" in ln)
        return float(re.search(r"([\d.]+) GiB", line).group(1))

    claims(
        doc,
        r"\(softmax, then its product with the logits\): (\d+) GiB at 8B\. In chunks, three fp32 chunks are live "
        r"at once, ([\d.]+) GiB",
        f"{entropy(whole):.0f}",
        f"{entropy(config_of('run_spade_8b.sh')):.1f}",
    )


def test_gpu_doc_states_the_h200_and_4b_numbers_of_the_table():
    doc = prose("docs/gpu.md")
    t = table(config_of("run_spade_30b.sh"), 139.8)
    assert t["update"] == table(config_of("run_spade_30b.sh"), 79.2)["update"]
    claims(doc, r"30B on an H200 \(139.8 GiB\): the same update peak, ([\d.]+) GiB; vLLM's KV cache grows to ([\d.]+) "
                r"GiB, ([\d.]+)M tokens per engine \((\d+) sequences of 32,768\)",
           f"{t['update']:.1f}", f"{t['kv']:.1f}", f"{t['tokens']:.2f}", f"{t['sequences']:.0f}")  # fmt: skip
    t = table(config_of("run_spade_8b.sh"), 139.8)
    claims(doc, r"8B on an H200: KV ([\d.]+) GiB, ([\d.]+)M tokens per engine \((\d+) sequences of 36,864\)",
           f"{t['kv']:.1f}", f"{t['tokens']:.2f}", f"{t['sequences']:.0f}")  # fmt: skip
    t = table(config_of("run_spade_4b.sh"), 79.2)
    unset = t["kv_kib"] * 262144 / 2**20  # GiB of KV for one sequence of the 2507 model's 262,144 positions
    claims(doc, r"on an H100: update peak ([\d.]+) GiB, ([\d.]+)M tokens per engine; an unset `max_model_len` would "
                r"mean 262,144 tokens, (\d+) GiB of KV",
           f"{t['update']:.1f}", f"{t['tokens']:.2f}", f"{unset:.0f}")  # fmt: skip


def test_gpu_doc_states_the_rollout_layout_numbers():
    doc = prose("docs/gpu.md")
    two = table(config_of("run_spade_30b.sh"), 79.2)
    one = table(composed(*dry_run("run_spade_30b.sh", GEN_DP="2", **ENV)), 79.2)  # one replica of TP4 x DP2
    assert two["engines"] == 2
    claims(doc, r"weights grow from ([\d.]+) GiB \(experts / 8\) to ([\d.]+) GiB \(experts / 4\), so the KV cache "
                r"shrinks from ([\d.]+) to ([\d.]+) GiB",
           f"{one['weights']:.1f}", f"{two['weights']:.1f}", f"{one['kv']:.1f}", f"{two['kv']:.1f}")  # fmt: skip
    total, former = two["tokens"] * two["engines"], one["tokens"] * one["engines"]
    claims(doc, r"At (\d+) KiB per token per GPU \(4 KV heads over TP4\), that is ([\d.]+)M tokens per engine, (\d+) "
                r"sequences of 32,768, two engines: ([\d.]+)M tokens in all, against ([\d.]+)M for TP4 x DP2 "
                r"\(-(\d+)%\)",
           f"{two['kv_kib']:.0f}", f"{two['tokens']:.2f}", f"{two['sequences']:.0f}", f"{total:.1f}",
           f"{former:.1f}", f"{100 * (1 - total / former):.0f}")  # fmt: skip


def test_gpu_doc_states_the_30b_adam_and_checkpoint_numbers():
    doc = prose("docs/gpu.md")
    config_name, overrides = plan("run_spade_30b.sh")
    gpu_adam = table(composed(config_name, [o for o in overrides if "optimizer_cpu_offload" not in o]), 79.2)
    claims(doc, r"Adam adds about ([\d.]+) GiB per GPU to the 30B update: (\d+) GiB before allocator slack",
           f"{gpu_adam['adam']:.1f}", f"{gpu_adam['update']:.0f}")  # fmt: skip
    big, small = table(config_of("run_spade_30b.sh"), 79.2), table(config_of("run_spade_8b.sh"), 79.2)
    claims(doc, r"A 30B checkpoint \(`save_contents=\[model,optimizer,extra,hf_model\]`\) is about (\d+) GB "
                r"\((\d+) GiB\)",
           f"{big['checkpoint'] * 2**30 / 1e9:.0f}", f"{big['checkpoint']:.0f}")  # fmt: skip
    claims(doc, r"a 30B run needs about ([\d.]+) TiB free under `RUN_DIR`, and its 25 saves write about (\d+) TiB. An "
                r"8B checkpoint is about (\d+) GiB \((\d+) GiB of disk\)",
           f"{big['disk'] / 1024:.1f}", f"{big['written']:.0f}", f"{small['checkpoint']:.0f}",
           f"{small['disk']:.0f}")  # fmt: skip


def rollout_layout(script: str) -> str:
    """A launcher's engines as docs/paper.md's table names them."""
    cfg = config_of(script)
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    if actor.strategy != "megatron":
        return f"FSDP, vLLM TP {rollout.tensor_model_parallel_size}"
    meg, world = actor.megatron, cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
    tp, dp = rollout.tensor_model_parallel_size, rollout.data_parallel_size
    return (f"Megatron TP {meg.tensor_model_parallel_size} + SP, EP {meg.expert_model_parallel_size}; vLLM TP {tp} x "
            f"DP {dp} (EP {rollout.expert_parallel_size}), {world // (tp * dp)} replicas")  # fmt: skip


def test_paper_doc_gives_each_runs_composed_engines():
    rows = {r.split("|")[1].strip(): r for r in (ROOT / "docs/paper.md").read_text().splitlines()
            if r.startswith("| games ") or r.startswith("| tool use ")}  # fmt: skip
    for run in ("games 4B", "games 8B", "games 30B", "tool use 4B", "tool use 8B"):
        script = f"run_spade_{run.split()[0] if run.startswith('games') else 'tool_use'}_{run.split()[-1].lower()}.sh"
        assert f"| {rollout_layout(script)} |" in rows[run], (run, rollout_layout(script))
    assert "| Megatron, as games 30B |" in rows["tool use 30B"]
    assert rollout_layout("run_spade_tool_use_30b.sh") == rollout_layout("run_spade_games_30b.sh")


def test_readme_gives_the_30b_launchers_composed_engines():
    readme = (ROOT / "README.md").read_text().splitlines()
    line = next(ln for ln in readme if ln.startswith("| `examples/run_spade_30b"))
    cfg = config_of("run_spade_30b.sh")
    rollout = cfg.actor_rollout_ref.rollout
    assert (f"vLLM {8 // rollout.tensor_model_parallel_size} x TP{rollout.tensor_model_parallel_size} "
            f"(EP{rollout.expert_parallel_size})") in line, line  # fmt: skip
