"""Aligned power-of-two block packing on a GPU x step grid (shared by fifo and fast).

Each step's occupancy is one Python integer used as a bit set over the GPUs (bit g
= GPU g busy), padded up to a power of two with permanently busy bits. For a
block size s, "folding" a mask (m |= m >> 1, >> 2, ... >> s/2, then keeping the
bits at multiples of s) leaves one bit per busy aligned block, so the free
aligned blocks of a whole run are a handful of big-integer operations, whatever
the GPU count. Nothing is done per GPU-step in Python.
"""

from __future__ import annotations

__all__ = ["BitPacker", "next_power_of_two"]


def next_power_of_two(n: int) -> int:
    """Smallest power of two >= n (n >= 1)."""
    return 1 << (max(1, n) - 1).bit_length()


class BitPacker:
    """Busy GPUs per step as bit sets; GPUs >= `usable` are never handed out."""

    def __init__(self, steps: int, gpus: int, usable: int | None = None) -> None:
        self.steps = steps
        self.gpus = gpus
        self.width = next_power_of_two(gpus)
        usable = gpus if usable is None else max(0, min(usable, gpus))
        reserved = ((1 << self.width) - 1) ^ ((1 << usable) - 1)
        self.masks = [reserved] * steps
        self.used = [0] * steps
        self._align: dict[int, int] = {}
        self._spread: dict[tuple[int, int], int] = {}

    def align(self, size: int) -> int:
        """Bits at the start of every aligned block of `size`."""
        bits = self._align.get(size)
        if bits is None:
            bits = 0
            for g in range(0, self.width, size):
                bits |= 1 << g
            self._align[size] = bits
        return bits

    def fold(self, mask: int, size: int) -> int:
        """One bit at the start of each aligned block of `size` that has a busy GPU."""
        k = 1
        while k < size:
            mask |= mask >> k
            k *= 2
        return mask & self.align(size)

    def span_mask(self, t0: int, t1: int) -> int:
        """GPUs busy at any step of [t0, t1)."""
        m = 0
        for t in range(t0, t1):
            m |= self.masks[t]
        return m

    def free_blocks(self, size: int, t0: int, t1: int) -> int:
        """Start bits of the aligned blocks of `size` free for all of [t0, t1)."""
        return self.align(size) & ~self.fold(self.span_mask(t0, t1), size)

    def occupy(self, t0: int, t1: int, g0: int, size: int) -> None:
        """Mark GPUs [g0, g0 + size) busy for steps [t0, t1)."""
        block = ((1 << size) - 1) << g0
        masks, used = self.masks, self.used
        for t in range(t0, t1):
            masks[t] |= block
            used[t] += size

    def release(self, t0: int, t1: int, g0: int, size: int) -> None:
        """Mark GPUs [g0, g0 + size) free again for steps [t0, t1) (they must be busy)."""
        keep = ~(((1 << size) - 1) << g0)
        masks, used = self.masks, self.used
        for t in range(t0, t1):
            masks[t] &= keep
            used[t] -= size

    def _spread_bits(self, size: int, level: int) -> int:
        """Pattern that copies a bit at a multiple of `level` onto each `size` block in it."""
        key = (size, level)
        pattern = self._spread.get(key)
        if pattern is None:
            pattern = 0
            for k in range(level // size):
                pattern |= 1 << (k * size)
            self._spread[key] = pattern
        return pattern

    def best_fit(self, size: int, t0: int, t1: int, candidates: int) -> int:
        """Buddy-style choice among free aligned blocks (start bits in `candidates`).

        Prefer blocks whose smallest enclosing block is already partly busy during
        the run (whole large blocks stay free for the large jobs still to come),
        then blocks busy just before or after the run (fewer holes in time), then
        the lowest index. Returns the first GPU of the chosen block.
        """
        if candidates & (candidates - 1):
            m = self.span_mask(t0, t1)
            k = 1
            while k < size:
                m |= m >> k
                k *= 2
            level = size
            while level < self.width:
                m |= m >> level
                level *= 2
                busy = (m & self.align(level)) * self._spread_bits(size, level)
                narrowed = candidates & busy
                if narrowed:
                    candidates = narrowed
                    break
            if candidates & (candidates - 1):
                around = 0
                if t0 > 0:
                    around |= self.masks[t0 - 1]
                if t1 < self.steps:
                    around |= self.masks[t1]
                narrowed = candidates & self.fold(around, size)
                if narrowed:
                    candidates = narrowed
        return (candidates & -candidates).bit_length() - 1
