"""The CPU rollout server's torch work runs on one thread of its own, at nice 0 (issue 39).

Inside its Ray actor the server ran its batch ~1.5x slower than a plain process: Ray starts workers at nice 15,
and generation ran on asyncio's executor threads while weight updates ran on the event loop's thread, each thread
able to start an OpenMP team of its own. Asserted on the real engine, model and loader: which thread runs every
torch call, and the nice value of that thread and of the threads it creates.
"""

from __future__ import annotations

import asyncio
import os
import threading

import torch

from recipe.spade.cpu.hf_engine import BatchedGenerator, SamplingRequest
from recipe.spade.cpu.hf_rollout import load_on_torch_thread, prepare_generation_threads
from recipe.spade.cpu.tiny_model import build_tiny_qwen3


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)  # the calling thread's, on Linux


def test_generation_and_weight_updates_run_on_the_engines_one_thread(tmp_path):
    threads = torch.get_num_threads()
    model, executor = load_on_torch_thread(str(build_tiny_qwen3(tmp_path / "model")), 1)
    try:
        engine = BatchedGenerator(model, eos_ids=[408], pad_id=406, max_batch=8, executor=executor)
        seen: list[int] = []
        run_batch, load = engine.run_batch, engine.load_state_dict
        engine.run_batch = lambda requests: seen.append(threading.get_ident()) or run_batch(requests)
        engine.load_state_dict = lambda *a, **k: seen.append(threading.get_ident()) or load(*a, **k)
        state = {k: v.clone() for k, v in model.state_dict().items()}

        async def rounds() -> None:
            for _ in range(3):
                await engine.load_weights(state, tied_embeddings=True)
                requests = [SamplingRequest([407, 65 + i], 4, temperature=0.0) for i in range(3)]
                await asyncio.gather(*(engine.generate(r) for r in requests))

        asyncio.run(rounds())
        torch_thread = executor.submit(threading.get_ident).result()
        assert len(seen) >= 6 and set(seen) == {torch_thread} and torch_thread != threading.get_ident()
    finally:
        executor.shutdown()
        torch.set_num_threads(threads)


def test_the_torch_thread_leaves_rays_nice_and_its_children_inherit(tmp_path):
    """A thread at Ray's nice 15 (the test runs as root, as CI does) prepares itself to 0; threads it starts
    (an OpenMP team) start at 0 too. Other threads of the process keep theirs."""
    threads = torch.get_num_threads()
    seen: dict[str, int] = {}

    def ray_worker_thread() -> None:
        os.setpriority(os.PRIO_PROCESS, 0, 15)
        prepare_generation_threads(1)
        seen["prepared"] = _nice()
        child = threading.Thread(target=lambda: seen.update(child=_nice()))
        child.start()
        child.join()

    try:
        worker = threading.Thread(target=ray_worker_thread)
        worker.start()
        worker.join()
    finally:
        torch.set_num_threads(threads)
    assert seen == {"prepared": 0, "child": 0}
    assert _nice() == 0  # this thread was never niced
