"""Tools for one machine on top of the recipe: the demo, ``make learn``, the CPU GRPO entry point, ladder tools.

Also the launcher's process group and the designer-validity measurement. The recipe (``recipe/spade``) never imports
from here (docs/architecture.md).
"""
