"""``python -m spade_envs.simulate``: the same as ``spade-envs simulate``."""

import sys

from spade_envs.simulate.cli import main

sys.exit(main())
