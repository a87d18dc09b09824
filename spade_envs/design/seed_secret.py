"""The run's seed secret: the key of every seed an environment is played on, which env code never sees.

Measurement, training and validation seeds are keyed hashes of the run seed and a key naming the draw (``step 4
design 2``, ``step 5 row 3``). The run seed is public (``spade.seed``, 0 by default) and the key forms are in this
repository, so without a secret generated code could import ``hashlib``, recompute a run's measurement seeds (a
400-step run's 9,600 in 15 ms) and be a frontier where it is measured and trivial where it is trained. Keyed with
HMAC-SHA256 by a per-run secret, the seeds are unpredictable to anything that lacks it.

The secret is drawn at a fresh start (:func:`run_secret`, 32 bytes of :mod:`secrets`), or pinned by the user
(``spade.seed_secret``, a hex string, for tests and exact reproductions: :func:`parse_secret`). The curriculum keeps
it in its checkpoint state (``pool_state.json``, written owner-only), so a resumed run replays the same seeds. It
never enters an observation, a prompt, the env's process (workers start from a fresh interpreter whose requests
carry the env source only) or a file the sandbox can read (``bwrap`` and ``landlock`` expose only ``/usr``, the
interpreter, the venv's packages and this package; docs/designer.md's threat model says where it is thinner).
"""

from __future__ import annotations

import hmac
import secrets

__all__ = [
    "MIN_SECRET_BYTES",
    "SECRET_BYTES",
    "check_secret",
    "keyed_digest",
    "parse_secret",
    "resumed_secret",
    "run_secret",
]

#: Bytes of a drawn secret.
SECRET_BYTES = 32
#: The fewest bytes a secret may have (a pinned one included): a short secret could be enumerated.
MIN_SECRET_BYTES = 16


def parse_secret(value: object, name: str = "spade.seed_secret") -> bytes | None:
    """A pinned secret from its hex form (``name`` is the option it came from); ``None`` stays ``None`` (draw one)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError(f"{name} must be a hex string, got the number {value}: quote it (all its digits are 0-9)")
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a hex string or null, got {type(value).__name__} {value!r}")
    try:
        secret = bytes.fromhex(value)
    except ValueError:
        raise ValueError(f"{name} must be a hex string (0-9, a-f), got {value!r}") from None
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"{name} must hold at least {MIN_SECRET_BYTES} bytes ({2 * MIN_SECRET_BYTES} hex digits), "
                         f"got {len(secret)}")  # fmt: skip
    return secret


def run_secret(pinned: bytes | None = None) -> bytes:
    """The secret of a fresh run: ``pinned`` if given (checked), else :data:`SECRET_BYTES` fresh random bytes."""
    if pinned is None:
        return secrets.token_bytes(SECRET_BYTES)
    check_secret(pinned)
    return bytes(pinned)


def resumed_secret(saved: object, pinned: bytes | None, where: str) -> bytes:
    """The secret a resume continues with: the checkpoint's (``saved``, hex; a pin must agree), else the pin.

    A checkpoint written before the secret existed holds none: its seeds were public, and resuming it needs a pin
    (the steps after the checkpoint then draw other seeds than the crashed run did), never a silent public key.
    """
    secret = parse_secret(saved, f"{where}: seed_secret")
    if secret is None and pinned is None:
        raise ValueError(
            f"{where} holds no seed secret (it was written before spade.seed_secret existed, when seeds were "
            "public). To resume it, pin a new one: spade.seed_secret=<hex string, 32+ digits, e.g. from "
            "`openssl rand -hex 32`>; the steps after the checkpoint then draw other seeds than the crashed run did"
        )
    if secret is not None and pinned is not None and secret != pinned:
        raise ValueError(
            f"spade.seed_secret differs from the seed secret saved in {where}: a resume replays the checkpoint's "
            "seeds; set spade.seed_secret=null (or to the saved secret) to resume"
        )
    return run_secret(secret if secret is not None else pinned)


def keyed_digest(secret: bytes, material: bytes) -> bytes:
    """HMAC-SHA256 of ``material`` under ``secret``: the hash every seed is drawn from."""
    check_secret(secret)
    return hmac.digest(secret, material, "sha256")


def check_secret(secret: object) -> None:
    """Refuse what is not a secret: not bytes, or shorter than :data:`MIN_SECRET_BYTES` (an empty key is public)."""
    if not isinstance(secret, (bytes, bytearray)):
        raise TypeError(f"a seed secret must be bytes, got {type(secret).__name__}")
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"a seed secret must hold at least {MIN_SECRET_BYTES} bytes, got {len(secret)}")
