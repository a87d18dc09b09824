r"""``python -m recipe.spade.laptop.ladder_baseline MODEL_DIR``: a model's win rate on each ladder rung before training.

GRPO learns only from groups with both wins and losses, so ``make learn`` trains on the rungs whose baseline sits
between 0.1 and 0.6. This measures it the way the trainer plays: the agent's system prompt and first-turn wrapping
(``spade_envs.play.prompts.agent_messages``), later observations as plain user turns, sampling at the rollout
temperature, ``turn_tokens`` per reply, the command taken from the last ``\boxed{}``. Episodes of one rung are
batched: every turn is one ``generate`` call over the episodes still running. The rungs are trusted built-ins, so
they run in-process here (the trainer plays them in its sandbox).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from spade_envs.builtin.ladder import LADDER, load_rung
from spade_envs.envs.contract import extract_command, is_win, outcome_reward
from spade_envs.play.prompts import agent_messages

__all__ = ["RungBaseline", "measure", "main"]


@dataclass(frozen=True)
class RungBaseline:
    """Wins out of episodes on one rung, and the seconds the measurement took."""

    name: str
    wins: int
    episodes: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.wins / self.episodes


def measure(model, tokenizer, name: str, episodes: int, *, temperature: float, turn_tokens: int, seed: int = 0):
    """Play ``episodes`` episodes of rung ``name`` (seeds ``seed..seed+episodes-1``) and count the wins."""
    start = time.monotonic()
    torch.manual_seed(seed)
    envs, chats, done, won = [], [], [False] * episodes, [False] * episodes
    for i in range(episodes):
        env = load_rung(name)()
        obs, _ = env.reset(seed + i)
        envs.append(env)
        chats.append(agent_messages("games", obs))
    for _turn in range(max(e.max_turns for e in envs)):
        live = [i for i in range(episodes) if not done[i]]
        if not live:
            break
        texts = [tokenizer.apply_chat_template(chats[i], tokenize=False, add_generation_prompt=True) for i in live]
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**batch, do_sample=temperature > 0, temperature=temperature or None, top_p=1.0,
                                 top_k=0, max_new_tokens=turn_tokens, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
        replies = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        for i, reply in zip(live, replies):
            obs, reward, terminated, truncated, _ = envs[i].step(extract_command(reply))
            chats[i] += [{"role": "assistant", "content": reply}, {"role": "user", "content": obs}]
            last_turn = len(chats[i]) // 2 - 1 >= envs[i].max_turns
            if terminated or truncated or last_turn:
                done[i] = True
                won[i] = is_win(outcome_reward(reward, terminated, truncated and not terminated))
    return RungBaseline(name, sum(won), episodes, round(time.monotonic() - start, 1))


def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per rung (wins, rate, seconds) and, with ``--json``, write them to a file."""
    parser = argparse.ArgumentParser(prog="python -m recipe.spade.laptop.ladder_baseline", description=main.__doc__)
    parser.add_argument("model_dir", help="an HF model directory (e.g. SmolLM2 from smollm2_from_gguf)")
    parser.add_argument("--episodes", type=int, default=32, help="episodes per rung (default 32)")
    parser.add_argument("--temperature", type=float, default=1.0, help="the rollout temperature (default 1.0)")
    parser.add_argument("--turn-tokens", type=int, default=32, help="tokens per reply, as spade.turn_tokens")
    parser.add_argument("--rungs", nargs="*", default=[r.name for r in LADDER], help="rung names (default: all)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir, padding_side="left")
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    results = []
    for name in args.rungs:
        result = measure(model, tokenizer, name, args.episodes, temperature=args.temperature,
                         turn_tokens=args.turn_tokens)  # fmt: skip
        results.append(result)
        print(f"{name:14s} {result.wins:3d}/{result.episodes}  {result.rate:.2f}  ({result.seconds} s)", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([asdict(r) | {"rate": r.rate} for r in results], f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
