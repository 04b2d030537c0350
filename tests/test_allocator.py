"""gflkit.allocator: freed large blocks stay in the process, so a step's tensors do not page-fault in again."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

#: in a fresh interpreter, one thread: page faults of ten steps that each create and free two 20 MiB tensors
FAULTS_OF_TEN_STEPS = textwrap.dedent("""
    import resource, sys, torch
    from gflkit.allocator import keep_freed_blocks
    torch.set_num_threads(1)
    applied = keep_freed_blocks() if sys.argv[1] == "keep" else False
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    x = torch.ones(5 * 2**20)
    def step():
        doubled = x * 2
        return float((doubled + 1)[0])
    for _ in range(3):
        step()
    before = faults()
    for _ in range(10):
        step()
    print(applied, faults() - before)
""")


def faults_of_ten_steps(mode: str, **env: str) -> tuple[bool, int]:
    result = subprocess.run([sys.executable, "-c", FAULTS_OF_TEN_STEPS, mode], capture_output=True, text=True,
                            check=True, env={**os.environ, **env})
    applied, faults = result.stdout.split()
    return applied == "True", int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the setting is glibc's")
def test_freed_blocks_are_reused_without_page_faults():
    """Without the setting glibc mostly returns each freed block and every step faults its 20 MiB in again
    (10 steps: ~100k faults here; now and then its dynamic threshold keeps them); with it the steps reuse the
    freed blocks, glibc placing one afresh now and then (where the heap's top no longer holds an aligned block)."""
    applied, kept = faults_of_ten_steps("keep")
    pages_per_step = 2 * 5 * 2**20 * 4 // 4096
    assert applied
    assert kept <= 2 * pages_per_step


def test_a_users_own_allocator_settings_are_left_alone():
    applied, _ = faults_of_ten_steps("keep", MALLOC_TRIM_THRESHOLD_="0")
    assert not applied
