"""GPU blocks inside hosts: bit masks, aligned power-of-two blocks, job shapes, and the
index of free blocks across hosts. Decides nothing by itself; placement and preemption
are built on it.

A host's free GPUs are an int bitmask (bit i = GPU i free); no per-GPU objects.
`FreeIndex` keeps, for every block size p (1, 2, 4, ...), the healthy hosts that have
a free aligned p-block bucketed by their number of free GPUs, so "does a p-block
exist anywhere" is O(1) and best fit (fewest free GPUs that still fit, so whole hosts
stay whole) is a scan of at most `gpus per host` buckets.

Rules:
- a job of g <= host GPUs uses one host, inside an aligned block of p = next power of
  two >= g (start divisible by p). A job of non-power-of-two size (e.g. 3) needs a
  whole free p-block and takes its lowest g GPUs; the rest of the block stays free
  for smaller jobs. A job equal to the full size of a non-power-of-two host (e.g. 6
  on a 6-GPU host) takes that whole host.
- a larger job needs whole hosts of one size that divides it, all-or-nothing.
- inside a host the block whose largest enclosing free aligned block is smallest is
  used (buddy-style best fit), lowest index first.
"""

from __future__ import annotations

from itertools import compress

__all__ = [
    "BlockInfo",
    "BlockTable",
    "FreeIndex",
    "MaskTable",
    "Shape",
    "aligned_blocks",
    "block_info",
    "mask_of",
    "pow2ceil",
]

# (largest free aligned block, {block size p: best start of a free p-block})
BlockInfo = tuple[int, dict[int, int]]

# Memo tables stop growing here (they are keyed by content, so they never go stale).
_MAX_BLOCK_ENTRIES = 500_000
_MAX_MASK_ENTRIES = 100_000


def pow2ceil(g: int) -> int:
    """The smallest power of two >= g (g >= 1)."""
    return 1 << (g - 1).bit_length()


def mask_of(indices: tuple[int, ...]) -> int:
    """Bitmask of GPU indices."""
    m = 0
    for i in indices:
        m |= 1 << i
    return m


def block_info(gpus: int, free: int) -> BlockInfo:
    """Largest free aligned power-of-two block of a host and its best block per size."""
    best: dict[int, int] = {}
    largest = 0
    p = 1
    while p <= gpus:
        start = _best_block_start(gpus, free, p)
        if start < 0:
            break
        best[p] = start
        largest = p
        p *= 2
    return largest, best


def _best_block_start(gpus: int, free: int, p: int) -> int:
    """The free aligned p-block whose largest enclosing free block is smallest, or -1."""
    full = (1 << p) - 1
    choice = -1
    choice_enclosing = 0
    for s in range(0, gpus - p + 1, p):
        bm = full << s
        if free & bm != bm:
            continue
        q = p
        while q * 2 <= gpus:
            s2 = s - s % (2 * q)
            bm2 = ((1 << (2 * q)) - 1) << s2
            if s2 + 2 * q <= gpus and free & bm2 == bm2:
                q *= 2
            else:
                break
        if choice < 0 or q < choice_enclosing:
            choice, choice_enclosing = s, q
    return choice


class BlockTable(dict[tuple[int, int], BlockInfo]):
    """`table[gpus, free]` is `block_info(gpus, free)`, computed once per distinct key
    (a dict subclass: a hit is one C-level lookup)."""

    def __missing__(self, key: tuple[int, int]) -> BlockInfo:
        info = block_info(key[0], key[1])
        if len(self) < _MAX_BLOCK_ENTRIES:
            self[key] = info
        return info


class MaskTable(dict[tuple[int, ...], int]):
    """`table[indices]` is `mask_of(indices)`, computed once per distinct tuple."""

    def __missing__(self, key: tuple[int, ...]) -> int:
        m = mask_of(key)
        if len(self) < _MAX_MASK_ENTRIES:
            self[key] = m
        return m


def aligned_blocks(gpus: int, avail: int, p: int) -> list[int]:
    """All starts of aligned p-blocks entirely inside `avail`."""
    full = (1 << p) - 1
    return [s for s in range(0, gpus - p + 1, p) if avail & (full << s) == full << s]


class Shape:
    """How a job of `gpus` GPUs can be placed on the cluster's host sizes.

    `block` > 0: one host, inside an aligned block of that size; `whole`: the
    alternatives in whole hosts, [(host size, hosts needed)]; `reason` (non-empty)
    says why the job can never run here.
    """

    __slots__ = ("block", "gpus", "hosts_needed", "reason", "whole")

    def __init__(self, gpus: int, host_sizes: list[int]) -> None:
        self.gpus = gpus
        self.block = 0
        self.whole: list[tuple[int, int]] = []
        self.hosts_needed = 1
        self.reason = ""
        if gpus <= 0:
            self.reason = f"cannot run: asks for {gpus} GPUs"
            return
        biggest = max(host_sizes) if host_sizes else 0
        if gpus <= biggest:
            p = pow2ceil(gpus)
            if any(p <= g for g in host_sizes):
                self.block = p
            if gpus in host_sizes and p > gpus:
                self.whole = [(gpus, 1)]
            if not self.block and not self.whole:
                self.reason = (
                    f"cannot run: {gpus} GPUs need an aligned block of {p}, "
                    f"larger than any host ({biggest} GPUs)"
                )
            return
        for g in sorted(set(host_sizes), reverse=True):
            n = gpus // g
            if gpus % g == 0 and n <= host_sizes.count(g):
                self.whole.append((g, n))
        if self.whole:
            self.hosts_needed = self.whole[0][1]
        else:
            sizes = "/".join(str(s) for s in sorted(set(host_sizes)))
            self.reason = (
                f"cannot run: {gpus} GPUs is more than one host holds and not a multiple of "
                f"the host size ({sizes} GPUs) that the cluster has enough hosts for; "
                "jobs larger than one host need whole hosts"
            )


class FreeIndex:
    """Free GPUs of the schedulable hosts, indexed by block size and free count."""

    __slots__ = (
        "blocks",
        "buckets",
        "cnt",
        "free",
        "gpus",
        "maxblk",
        "nfree",
        "sizes",
        "whole",
    )

    def __init__(self, gpus: list[int], blocks: BlockTable | None = None) -> None:
        self.gpus = gpus
        self.blocks = blocks if blocks is not None else BlockTable()
        n = len(gpus)
        gmax = max(gpus) if gpus else 0
        self.sizes: list[int] = []
        p = 1
        while p <= gmax:
            self.sizes.append(p)
            p *= 2
        self.free = [0] * n  # mask as seen by new work (0 for unschedulable hosts)
        self.nfree = [0] * n
        self.maxblk = [0] * n
        # block size -> free GPU count -> hosts (an insertion-ordered set)
        self.buckets: dict[int, list[dict[int, None]]] = {
            p: [{} for _ in range(gmax + 1)] for p in self.sizes
        }
        self.cnt: dict[int, int] = dict.fromkeys(self.sizes, 0)  # hosts with a free p-block
        self.whole: dict[int, dict[int, None]] = {g: {} for g in set(gpus)}  # wholly free

    def set(self, h: int, free: int) -> None:
        """Set host `h`'s free mask (as usable by new work) and re-index it."""
        old_mb = self.maxblk[h]
        old_f = self.nfree[h]
        g = self.gpus[h]
        if old_mb:
            buckets, cnt = self.buckets, self.cnt
            for p in self.sizes:
                if p > old_mb:
                    break
                del buckets[p][old_f][h]
                cnt[p] -= 1
        if old_f == g and old_f:
            del self.whole[g][h]
        self.free[h] = free
        f = free.bit_count()
        self.nfree[h] = f
        mb = self.blocks[g, free][0] if f else 0
        self.maxblk[h] = mb
        if mb:
            buckets, cnt = self.buckets, self.cnt
            for p in self.sizes:
                if p > mb:
                    break
                buckets[p][f][h] = None
                cnt[p] += 1
        if f == g and f:
            self.whole[g][h] = None

    def clear(self) -> None:
        """Index no host, as a new index (the tables are kept: a cycle clears the last
        cycle's index instead of building one)."""
        for h in compress(range(len(self.nfree)), self.nfree):
            self.set(h, 0)

    def any_free(self) -> bool:
        """Whether any schedulable GPU is free."""
        return bool(self.sizes) and self.cnt[1] > 0

    def find_block(self, p: int) -> int:
        """Best-fit host with a free aligned p-block, or -1 (O(gpus per host))."""
        if self.cnt.get(p, 0) <= 0:
            return -1
        for d in self.buckets[p][p:]:
            if d:
                return next(iter(d))
        return -1

    def take_block(self, h: int, p: int, g: int) -> tuple[int, ...]:
        """Allocate the lowest g GPUs of the best free aligned p-block on host h."""
        free = self.free[h]
        s = self.blocks[self.gpus[h], free][1][p]
        idx = tuple(range(s, s + g))
        self.set(h, free & ~(((1 << g) - 1) << s))
        return idx
