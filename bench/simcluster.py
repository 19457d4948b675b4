"""Benchmark the simulated cluster process through its adapter; prints JSON.

Scenario: one process on a free port with a fresh state directory; a 128 x 8-GPU
cluster; `--ended` jobs that already ended (reported until forgotten), then ~800
running jobs started one by one (as a cycle starts them). Timed: the process start
(until it answers), `start()`, `jobs()` (every cycle's first request) and `hosts()`.
Usage: ``python bench/simcluster.py [--ended 2000] [--repeats 30]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.adapters import ClusterPlacement, StartRequest  # noqa: E402
from scheduler.adapters.simcluster.control import SimClusterControl  # noqa: E402
from scheduler.adapters.simcluster.process import SimClusterProcess  # noqa: E402
from scheduler.adapters.simulated import SimulatedClusterAdapter  # noqa: E402


def _ms(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {
        "median_ms": round(statistics.median(values), 2),
        "p90_ms": round(values[int(0.9 * (len(values) - 1))], 2),
    }


def _timed(call, repeats: int) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append((time.perf_counter() - start) * 1000.0)
    return times, result


def run(ended: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        t0 = time.perf_counter()
        process = SimClusterProcess(state_dir=Path(directory)).start()
        start_process_s = time.perf_counter() - t0
        try:
            SimClusterControl(process.url, "bench").create(
                hosts=128, gpus_per_host=8, start_delay_s=0
            )
            adapter = SimulatedClusterAdapter(base_url=process.url, cluster="bench")
            for i in range(ended):  # zero-length runs: ended at once
                adapter.start(
                    StartRequest(
                        attempt_id=f"ended-{i}",
                        job_name="done",
                        gpus=1,
                        placements=(ClusterPlacement("h000", (0,)),),
                        run_for_s=0,
                    )
                )
            starts = []
            for host in range(128):  # 1-GPU jobs on odd hosts, 2-GPU jobs on even ones
                width = 2 if host % 2 == 0 else 1
                for first in range(0, 8, width):
                    t = time.perf_counter()
                    adapter.start(
                        StartRequest(
                            attempt_id=f"run-{host}-{first}",
                            job_name="train",
                            gpus=width,
                            placements=(
                                ClusterPlacement(
                                    f"h{host:03d}", tuple(range(first, first + width))
                                ),
                            ),
                            run_for_s=86400,
                        )
                    )
                    starts.append((time.perf_counter() - t) * 1000.0)
            jobs_ms, jobs = _timed(adapter.jobs, repeats)
            hosts_ms, _ = _timed(adapter.hosts, repeats)
            adapter.close()
        finally:
            process.stop()
    running = sum(1 for j in jobs if not j.ended)
    return {
        "scenario": {"hosts": 128, "gpus": 1024, "running": running, "ended": len(jobs) - running},
        "process_start_s": round(start_process_s, 2),
        "start": {"count": len(starts), **_ms(starts)},
        "jobs": _ms(jobs_ms),
        "hosts": _ms(hosts_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ended", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(json.dumps(run(args.ended, args.repeats), indent=2))


if __name__ == "__main__":
    main()
