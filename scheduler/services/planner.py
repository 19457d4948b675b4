"""The window planner page's data: a shipped scenario planned in the three modes.

A page view read the solver's output fresh: up to three plans, the full (CP-SAT) one up
to `PAGE_TIME_LIMIT_S`, about 2 s of server CPU per GET for any signed-in user. The
plans depend only on the scenario file and the planner, so they are kept in the cache
under the file's digest and the installed version, and a view costs a cache read.
"""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from pathlib import Path
from typing import Any

from django.core.cache import cache

from scheduler.core.planner import load_scenario, run_mode
from scheduler.core.planner.views_data import heatmap_data, list_scenarios

PAGE_TIME_LIMIT_S = 2.0  # the full (CP-SAT) mode's limit on the page; the CLI defaults to 10 s
PAGE_MODES = ("fifo", "fast", "full")
PLANS_CACHE_S = 24 * 3600


def scenario_plans(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """(the scenario's listing, its heatmaps in `PAGE_MODES` order), or None when no
    shipped scenario has that name; solved once per scenario file and version."""
    scenario = next((s for s in list_scenarios() if s["name"] == name), None)
    if scenario is None:
        return None
    path = Path(scenario["path"])
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    key = f"planner-page:{version('allot')}:{PAGE_TIME_LIMIT_S}:{name}:{digest}"
    plans: list[dict[str, Any]] | None = cache.get(key)
    if plans is None:
        loaded = load_scenario(path)
        plans = [
            heatmap_data(loaded, run_mode(loaded, mode, PAGE_TIME_LIMIT_S)) for mode in PAGE_MODES
        ]
        cache.set(key, plans, PLANS_CACHE_S)
    return scenario, plans
