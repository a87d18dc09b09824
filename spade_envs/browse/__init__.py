"""``spade-envs browse RUN_DIR``: a static, self-contained web site of a run's record (``spade.record``)."""

from spade_envs.browse.site import build_site, serve

__all__ = ["build_site", "serve"]
