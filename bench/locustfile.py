"""Locust users for bench/load.py: researchers and managers using Allot at once.

Each simulated user holds an API token (from ALLOT_LOAD_TOKENS, a JSON file written by
bench/load.py) and mixes what people do all day: list their jobs, read the queue and a
job page, read the budget tree, shares and dashboards, and now and then submit a job.
Paths that are not served (a dashboard endpoint not deployed) are skipped, not counted.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from pathlib import Path

from locust import HttpUser, between, task

SETUP = json.loads(Path(os.environ["ALLOT_LOAD_SETUP"]).read_text())


class Researcher(HttpUser):
    wait_time = between(1, 3)

    def on_start(self) -> None:
        member = random.choice(SETUP["members"])
        self.client.headers["Authorization"] = f"Token {member['token']}"
        self.project = member["project"]
        self.jobs = SETUP["job_ids"]
        self.cluster = SETUP["cluster"]

    @task(1)
    def submit(self) -> None:
        body = {
            "project": self.project,
            "cluster": self.cluster,
            "name": "load",
            "gpus": random.choice([1, 2, 4, 8]),
            "min_runtime_s": 900,
            "kind": random.choice(["debug", "training"]),
            "spec": {"image": "pytorch:2.5", "command": "python train.py"},
            "duration_s": 3600,
        }
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        with self.client.post(
            "/api/v1/jobs/", json=body, headers=headers, name="POST jobs/", catch_response=True
        ) as response:
            if response.status_code != 201:
                response.failure(f"{response.status_code}: {response.text[:200]}")

    @task(4)
    def my_jobs(self) -> None:
        self.client.get("/api/v1/jobs/?mine=1", name="GET jobs/?mine")

    @task(3)
    def queue(self) -> None:
        self.client.get(f"/api/v1/queue/?cluster={self.cluster}", name="GET queue/")

    @task(3)
    def job_page(self) -> None:
        self.client.get(f"/api/v1/jobs/{random.choice(self.jobs)}/", name="GET jobs/{id}/")

    @task(2)
    def tree(self) -> None:
        self.client.get("/api/v1/tree/", name="GET tree/")

    @task(1)
    def budget_changes(self) -> None:
        self.client.get("/api/v1/budget-changes/", name="GET budget-changes/")

    @task(2)
    def dashboards(self) -> None:
        for path in SETUP["dashboard_paths"]:
            self.client.get(path, name=f"GET {path.split('?')[0]}")
