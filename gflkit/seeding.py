"""Deterministic random streams derived from a run's seed.

Every random draw of a run (client sampling, minibatch order, dropout) comes from a generator seeded
by ``derive_seed(seed, round, client, ...)``. Nothing depends on how many draws happened before, so a
run resumed from a checkpoint draws exactly what the uninterrupted run would have drawn.
"""
from __future__ import annotations

import numpy as np
import torch


# Tags that keep the streams of different purposes apart.
MODEL_INIT = 2**32 + 1
CLIENT_SAMPLING = 2**32 + 2
TORCH_GLOBAL = 2**32 + 3
FEDSKA_SERVER_INIT = 2**32 + 4
FEDSKA_SERVER_NOISE = 2**32 + 5
EDGE_SAMPLING = 2**32 + 6
UPLOAD_CHANNEL = 2**32 + 7
FEDSAGE = 2**32 + 0x5A6E
FEDPUB_PROXY = 2**32 + 0xFED9B
FEDATT_NOISE = 2**32 + 0xFEDA7
SFL_GRAPH = 2**32 + 0x5F1
HELD_OUT_CLIENTS = 2**32 + 8
FEDCG_TEACHER = 2**32 + 0xFEDC6


def derive_seed(seed: int, *keys: int) -> int:
    """A 63-bit seed that depends only on ``seed`` and ``keys`` (non-negative ints; numpy's SeedSequence)."""
    entropy = [int(seed), *[int(k) for k in keys]]
    if min(entropy) < 0:
        raise ValueError(f"seeds and stream keys must be non-negative, got {entropy}")
    state = np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def generator(seed: int, *keys: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``derive_seed(seed, *keys)``."""
    return torch.Generator().manual_seed(derive_seed(seed, *keys))


def seed_global_rng(seed: int, device: torch.device) -> None:
    """Seed torch's global generators used by layers such as dropout: the CPU one, and CUDA's on a GPU.

    (Cheaper than ``torch.manual_seed``, which matters when it runs once per client per round.)
    """
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)
