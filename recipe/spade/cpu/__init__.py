"""CPU backend for verl 0.9.1: platform plugin, hf rollout, guarded patches, tiny models (see plugin.py)."""
