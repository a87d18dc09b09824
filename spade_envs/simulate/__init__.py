"""Curriculum simulator: SPADE's self-play schedule with parametric stand-ins for the model, on CPU in seconds.

The env pool is the recipe's own state machine (:class:`~spade_envs.curriculum.Curriculum`: memory, live envs, play
windows, skill rotation, learning-potential EMAs, eviction), and the designer rewards, memory and env records are the
real ones (:mod:`spade_envs.design.rewards`, :mod:`spade_envs.design.memory`, :class:`~spade_envs.envs.spec.EnvSpec`);
only the two roles
of the model are replaced: an agent with an ability per skill (:mod:`.agent`) and a designer with a learned
difficulty policy per skill (:mod:`.designer`). See ``docs/simulator.md``.
"""

from spade_envs.simulate.agent import Agent, expected_outcome, progress, win_probability
from spade_envs.simulate.config import SimulationConfig
from spade_envs.simulate.designer import INVALID_CODES, FixedPool, GaussianDesigner, sim_spec
from spade_envs.simulate.loop import Run, Simulation, StepMetrics, simulate, simulate_many

__all__ = [
    "INVALID_CODES",
    "Agent",
    "FixedPool",
    "GaussianDesigner",
    "Run",
    "Simulation",
    "SimulationConfig",
    "StepMetrics",
    "expected_outcome",
    "progress",
    "sim_spec",
    "simulate",
    "simulate_many",
    "win_probability",
]
