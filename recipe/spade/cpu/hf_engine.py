"""Batched token-in/token-out generation with a plain Hugging Face model (no verl): the CPU rollout's engine.

Agent loops send many requests at once; :class:`BatchedGenerator` collects whatever is pending (up to
``max_batch``), cuts it into groups of like prompt length, pads each into one batch and decodes with a KV cache,
honouring each request's own sampling parameters. Log-probs are those of the sampling distribution before
top-p/top-k filtering (log-softmax of the logits divided by the temperature; greedy requests use the raw logits), as
vLLM reports them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["BatchedGenerator", "Generation", "SamplingRequest", "length_groups"]


@dataclass
class SamplingRequest:
    """One request: prompt token ids and its sampling parameters (``temperature`` 0 means greedy)."""

    prompt_ids: list[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    repetition_penalty: float = 1.0
    ignore_eos: bool = False
    logprobs: bool = False

    @classmethod
    def from_params(cls, prompt_ids: list[int], params: dict[str, Any], max_tokens: int) -> SamplingRequest:
        """Build from verl/vLLM-style sampling params; unknown keys are ignored, as vLLM's server does."""
        return cls(
            prompt_ids=list(prompt_ids),
            max_tokens=max_tokens,
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            top_k=int(params.get("top_k", -1) or -1),
            repetition_penalty=float(params.get("repetition_penalty", 1.0) or 1.0),
            ignore_eos=bool(params.get("ignore_eos", False)),
            logprobs=bool(params.get("logprobs", False)),
        )


@dataclass
class Generation:
    """Generated token ids, their log-probs (if asked) and why generation stopped (``completed`` or ``length``)."""

    token_ids: list[int]
    log_probs: list[float] | None
    stop_reason: str


def length_groups(lengths: list[int], pad_slack: int) -> list[list[int]]:
    """Indices of ``lengths`` in groups of like length, shortest group first.

    Within a group every length is at least the longest less ``max(its own length, pad_slack)``: no row is more than
    doubled by padding, or it is padded by a few tokens only.
    """
    groups: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if groups and lengths[i] - lengths[groups[-1][0]] <= max(lengths[groups[-1][0]], pad_slack):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _has_sliding_window(config: Any) -> bool:
    """Whether any attention layer of the model windows its keys (Mistral, windowed Qwen2/3, Gemma's local layers)."""
    if "sliding_attention" in (getattr(config, "layer_types", None) or ()):
        return True
    return bool(getattr(config, "sliding_window", None)) and getattr(config, "use_sliding_window", True) is not False


@dataclass
class _Pending:
    request: SamplingRequest
    future: asyncio.Future = field(repr=False)


class BatchedGenerator:
    """Serve concurrent :meth:`generate` calls from one model, batching whatever is pending.

    ``lock`` serialises generation with weight updates (:meth:`load_state_dict`), so a batch never sees
    half-updated weights. ``gather_s``: once a request is pending, keep collecting while the next one arrives within
    this many seconds (up to ``max_batch``). Agent loops reach their first turn a few milliseconds apart (each starts
    an env first); without it the first request decodes alone and the rest wait for it, which on CPU costs a whole
    extra pass over the weights per token (``make learn``: a batch of 1, then 31).

    ``pad_slack``: a gathered batch is cut into groups of like prompt length (:func:`length_groups`), run shortest
    first, each answered as soon as it is done: a row is padded to its group's longest prompt, by at most its own
    length or ``pad_slack`` tokens. A 700-token agent turn batched with a 4k-token designer prompt would otherwise
    pay the 4k prompt's pass and wait for its 64-token answer.

    ``executor``: where every torch call of the engine runs (generation and :meth:`load_weights`); by default one
    thread of its own. One thread, always the same, means one OpenMP team in the process: libgomp counts the
    worker threads of every team, and once they outnumber the CPUs its idle workers stop spinning and sleep on a
    futex after every parallel region (issue 39: the rollout server's batch ran ~1.5x slower, half in the kernel).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        eos_ids: list[int],
        pad_id: int,
        max_batch: int = 32,
        gather_s: float = 0.0,
        executor: Executor | None = None,
        pad_slack: int = 256,
    ) -> None:
        if gather_s < 0:
            raise ValueError(f"gather_s must be >= 0, got {gather_s}")
        if pad_slack < 0:
            raise ValueError(f"pad_slack must be >= 0, got {pad_slack}")
        self.pad_slack = pad_slack
        self.sliding_window = _has_sliding_window(model.config)
        self.model = model.eval()
        self.eos_ids = set(eos_ids)
        self.pad_id = pad_id
        self.max_batch = max_batch
        self.gather_s = gather_s
        self.lock = threading.Lock()
        self.executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-generate")
        self._queue: asyncio.Queue[_Pending] | None = None
        self._worker: asyncio.Task | None = None
        self.batches_run = 0
        self.largest_batch = 0
        # work done so far, for throughput logs (``hf_rollout.py``'s stats file): requests answered, their prompt
        # tokens, the tokens they generated, and the wall seconds the torch thread spent in batches
        self.requests_run = 0
        self.prompt_tokens = 0
        self.generated_tokens = 0
        self.busy_s = 0.0

    async def generate(self, request: SamplingRequest) -> Generation:
        """Queue ``request`` and wait for its result."""
        loop = asyncio.get_running_loop()
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._serve())
        pending = _Pending(request, loop.create_future())
        await self._queue.put(pending)
        return await pending.future

    async def aclose(self) -> None:
        """Stop the batching task and wait for it (a later :meth:`generate` starts a new one).

        A task left pending when its event loop closes is destroyed by the GC; on Python 3.11 the traceback that logs
        can parse source in the middle of another parse (``SystemError: AST constructor recursion depth mismatch``).
        """
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done():
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    async def _serve(self) -> None:
        assert self._queue is not None
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self.max_batch:
                if not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                elif self.gather_s <= 0:
                    break
                else:
                    try:
                        batch.append(await asyncio.wait_for(self._queue.get(), self.gather_s))
                    except TimeoutError:
                        break
            lengths = [len(p.request.prompt_ids) for p in batch]
            for group in length_groups(lengths, self.pad_slack):
                await self._answer([batch[i] for i in group])

    async def _answer(self, batch: list[_Pending]) -> None:
        """Run one batch on the torch thread and settle its waiters (with the error, if it fails)."""
        try:
            requests = [p.request for p in batch]
            results = await asyncio.get_running_loop().run_in_executor(self.executor, self.run_batch, requests)
        except Exception as exc:  # noqa: BLE001  (every waiter must learn of the failure)
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(exc)
            return
        for p, result in zip(batch, results):
            if not p.future.done():
                p.future.set_result(result)

    async def load_weights(self, state_dict: dict[str, torch.Tensor], tied_embeddings: bool) -> None:
        """:meth:`load_state_dict` on the engine's torch thread (its copies are OpenMP regions too)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.executor, self.load_state_dict, state_dict, tied_embeddings)

    def load_state_dict(self, state_dict: dict[str, torch.Tensor], tied_embeddings: bool) -> None:
        """Replace the weights; any missing or unexpected key is an error (except a tied ``lm_head``)."""
        with self.lock:
            missing, unexpected = self.model.load_state_dict(state_dict, strict=False)
            missing = [k for k in missing if not (tied_embeddings and k == "lm_head.weight")]
            if missing or unexpected:
                raise KeyError(
                    f"weight update does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}"
                )

    @torch.no_grad()
    def run_batch(self, requests: list[SamplingRequest]) -> list[Generation]:
        """Generate for ``requests`` together (blocking); each row stops at EOS or at its own ``max_tokens``."""
        with self.lock:
            self.batches_run += 1
            self.largest_batch = max(self.largest_batch, len(requests))
            started = time.perf_counter()
            results = self._decode(requests)
            self.busy_s += time.perf_counter() - started
            self.requests_run += len(requests)
            self.prompt_tokens += sum(len(r.prompt_ids) for r in requests)
            self.generated_tokens += sum(len(g.token_ids) for g in results)
            return results

    def _prompt_pass(self, requests: list[SamplingRequest]) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The batch's prompts through the model: its cache, each row's next-token logits, mask and last position.

        The prompts are padded on the right and go through without a padding mask: under the causal mask no prompt
        token sees a pad, so torch's fused causal attention serves the whole batch. A padding mask (left padding)
        sends sdpa to its math path, which builds each row's L x L scores: a 4k-token designer prompt batched with
        three short agent turns took 0.95 s that way against 0.13 s for the four alone (tiny Qwen3, issue 39). The
        decode steps then mask the pads between a row's prompt and its new tokens. A sliding-window model counts its
        window by cache index, so there a short row would lose its own prompt behind the pads: it keeps left padding.
        """
        n = len(requests)
        lengths = torch.tensor([len(r.prompt_ids) for r in requests], dtype=torch.long)
        width = int(lengths.max())
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        if self.sliding_window:
            mask = (torch.arange(width)[None, :] >= (width - lengths)[:, None]).long()
            ids[mask.bool()] = torch.tensor([t for r in requests for t in r.prompt_ids], dtype=torch.long)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                             logits_to_keep=1)  # fmt: skip
            return out.past_key_values, out.logits[:, -1, :].float(), mask, positions[:, -1]
        for i, r in enumerate(requests):
            ids[i, : len(r.prompt_ids)] = torch.tensor(r.prompt_ids, dtype=torch.long)
        last = lengths - 1
        keep = torch.unique(last)  # the logits of each row's last prompt token, and no others
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=keep)
        logits = out.logits[torch.arange(n), torch.searchsorted(keep, last)].float()
        return out.past_key_values, logits, (torch.arange(width)[None, :] < lengths[:, None]).long(), last

    def _decode(self, requests: list[SamplingRequest]) -> list[Generation]:
        n = len(requests)
        past, logits, mask, last_pos = self._prompt_pass(requests)
        seen = [list(r.prompt_ids) for r in requests]
        tokens: list[list[int]] = [[] for _ in requests]
        logps: list[list[float]] = [[] for _ in requests]
        done = [False] * n
        reasons = ["length"] * n
        for _ in range(max(r.max_tokens for r in requests)):
            chosen = torch.full((n,), self.pad_id, dtype=torch.long)
            for i, r in enumerate(requests):
                if done[i]:
                    continue
                token, logp = self._sample(logits[i], r, seen[i])
                chosen[i] = token
                tokens[i].append(token)
                seen[i].append(token)
                if r.logprobs:
                    logps[i].append(logp)
                if token in self.eos_ids and not r.ignore_eos:
                    done[i], reasons[i] = True, "completed"
                elif len(tokens[i]) >= r.max_tokens:
                    done[i] = True
            if all(done):
                break
            mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long)], dim=1)
            last_pos = last_pos + 1
            out = self.model(input_ids=chosen[:, None], attention_mask=mask, position_ids=last_pos[:, None],
                             past_key_values=past, use_cache=True, logits_to_keep=1)  # fmt: skip
            past, logits = out.past_key_values, out.logits[:, -1, :].float()
        return [
            Generation(t, lp if r.logprobs else None, why) for t, lp, r, why in zip(tokens, logps, requests, reasons)
        ]

    @staticmethod
    def _sample(logits: torch.Tensor, r: SamplingRequest, seen: list[int]) -> tuple[int, float]:
        if r.repetition_penalty != 1.0 and seen:
            idx = torch.tensor(sorted(set(seen)), dtype=torch.long)
            picked = logits[idx]
            logits = logits.clone()
            logits[idx] = torch.where(picked > 0, picked / r.repetition_penalty, picked * r.repetition_penalty)
        if r.temperature <= 0:
            token = int(torch.argmax(logits))
            return token, float(torch.log_softmax(logits, -1)[token])
        scaled = logits / r.temperature
        logp_all = torch.log_softmax(scaled, -1)
        filtered = scaled.clone()
        if 0 < r.top_k < filtered.numel():
            kth = torch.topk(filtered, r.top_k).values[-1]
            filtered[filtered < kth] = float("-inf")
        if r.top_p < 1.0:
            sorted_logits, order = torch.sort(filtered, descending=True)
            cumulative = torch.softmax(sorted_logits, -1).cumsum(-1)
            drop = cumulative - torch.softmax(sorted_logits, -1) > r.top_p
            filtered[order[drop]] = float("-inf")
        token = int(torch.multinomial(torch.softmax(filtered, -1), 1))
        return token, float(logp_all[token])
