"""The benchmarks: file-based math and science, LiveCodeBench, Reasoning-Gym, BFCL-v4 multi-turn."""
