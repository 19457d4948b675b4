"""Where a job runs, written one way: the engine's reasons, a running job's stored reason,
a move's reason and the `allot show` attempts table all write `h013[0-7]`.

Plain Python (no Django, no server code, no CLI code), like allot_common.figures.
"""

from __future__ import annotations

from collections.abc import Iterable


def host_gpus_text(host: str, gpu_indices: Iterable[int]) -> str:
    """A host and GPUs as every reason writes them: `h0106[6]` for one GPU, `h0106[0-7]` for
    a block, `h0106[0-1,4]` where the GPUs are not contiguous."""
    indices = sorted(gpu_indices)
    runs: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return f"{host}[{','.join(runs)}]"
