"""Benchmark writing Allot's answers into Slurm job comments; prints JSON.

Starts the local Slurm cluster of the tests (`scheduler.adapters.slurm_local`), sbatches
`--jobs` held jobs to its `governed` partition (held and tagged by job_submit.lua),
then writes comments of the form Allot writes (`allot-job:<id> #<position> <reason>
ETA <time>`) in two ways, alternately, `--rounds` times: one `scontrol update`
process per job (the way before 2026-12-06, `SlurmClient.update_job`) and one
`scontrol` reading every update from stdin (`SlurmClient.set_comments`), for batches
of `--sizes` jobs. Reported: milliseconds per batch and per job of each round.

Needs root and Slurm installed (`make slurm`); no database.
Usage: ``.venv/bin/python bench/slurm_comments.py [--jobs 1000] [--sizes 100,500,1000]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.adapters.slurm.client import SlurmClient  # noqa: E402
from scheduler.adapters.slurm_local import LocalSlurm, install_slurm  # noqa: E402


def sbatch_held(conf: str, count: int) -> None:
    env = {**os.environ, "SLURM_CONF": conf}
    args = ["sbatch", "-p", "governed", "--gres=gpu:1", "--chdir=/tmp", "--output=/dev/null"]

    def one(_: int) -> None:
        subprocess.run(
            args,
            input="#!/bin/bash\nsleep 600\n",
            env=env,
            text=True,
            capture_output=True,
            check=True,
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))


def texts(ids: list[str], round_no: int) -> dict[str, str]:
    return {
        slurm_id: f"allot-job:{slurm_id} #{i + 1} waiting: project a1 is over its share "
        f"ETA 2026-12-06 18:{round_no % 60:02d}"
        for i, slurm_id in enumerate(ids)
    }


def per_process(client: SlurmClient, comments: dict[str, str]) -> float:
    t = time.perf_counter()
    for slurm_id, text in comments.items():
        client.update_job(slurm_id, comment=text)
    return time.perf_counter() - t


def batched(client: SlurmClient, comments: dict[str, str]) -> float:
    t = time.perf_counter()
    writes = client.set_comments(comments)
    elapsed = time.perf_counter() - t
    assert len(writes.written) == len(comments), writes.failed
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--sizes", default="100,500,1000")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    reason = install_slurm()
    if reason:
        raise SystemExit(f"no local Slurm cluster: {reason}")
    cluster = LocalSlurm.create()
    cluster.start()
    try:
        conf = str(cluster.conf_path)
        sbatch_held(conf, args.jobs)
        client = SlurmClient(slurm_conf=conf)
        ids = sorted((i for i, (s, _) in client.comments().items() if s == "PENDING"), key=int)
        results: dict[str, list[dict[str, float]]] = {}
        round_no = 0
        for _ in range(args.rounds):
            for size in (int(s) for s in args.sizes.split(",")):
                for how, write in (("one_process_each", per_process), ("one_scontrol", batched)):
                    if how == "one_process_each" and size > 100:
                        continue  # ~20 ms each: 100 tell enough
                    round_no += 1
                    seconds = write(client, texts(ids[:size], round_no))
                    results.setdefault(f"{how}_{size}", []).append(
                        {
                            "ms": round(seconds * 1000, 1),
                            "ms_per_job": round(seconds * 1000 / size, 2),
                        }
                    )
        print(
            json.dumps(
                {
                    "slurm": client.version(),
                    "held_jobs": len(ids),
                    "load_1min": round(os.getloadavg()[0], 1),
                    "results": results,
                },
                indent=2,
            )
        )
    finally:
        cluster.stop(remove=True)


if __name__ == "__main__":
    main()
