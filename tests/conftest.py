"""Shared fixtures. Django tests run against PostgreSQL (DATABASE_URL or the embedded one).

`make test` runs the suite under pytest-xdist: pytest-django gives each worker its own
test database and config/settings/test.py its own Redis database; the modules of one
xdist group run on one worker (`XDIST_GROUPS`, `--dist loadgroup`, grouped by the
scheduler made here).
With ALLOT_REQUIRE_ALL=1 (set by .ci/run) a skipped test fails (tests/support/require_all.py)."""

import os
from pathlib import Path

import pytest
from celery import current_app
from hypothesis import Phase, settings
from xdist.scheduler import LoadGroupScheduling

from config.celery import app as celery_app
from tests.factories import SuperUserFactory
from tests.support.require_all import (  # the hooks that make a skip a failure in CI
    pytest_make_collect_report,  # noqa: F401
    pytest_runtest_makereport,  # noqa: F401
)
from tests.support.scheduling import (
    PREFETCH_S,
    load_durations,
    longest_first,
    pending_s,
    write_durations,
)
from tests.support.template_db import use_template
from tests.support.tree import Tree, example_tree

pytest_plugins = [
    "tests.simcluster_plugin",
    "tests.support.live",
    "tests.support.clock",
    "tests.support.flush",
    "tests.support.nodelay",
    "tests.support.static",
    "tests.support.bytecode",
    "tests.support.browser_thread",  # `chromium` and `page`
]

# Hypothesis's explain phase traces every line the test runs after a failure; on the
# simulator's tests that turns one failing example into hours. Failures still shrink.
# Derandomized (the examples follow from each test's name, no example database): the
# property tests assert minimum counts of the cases their generators reach, and a random
# draw that misses a floor by chance would turn CI red for no change of the product.
# ALLOT_HYPOTHESIS_RANDOM=1 draws fresh examples, to explore beyond the fixed ones.
settings.register_profile(
    "allot",
    phases=tuple(p for p in Phase if p is not Phase.explain),
    derandomize=os.environ.get("ALLOT_HYPOTHESIS_RANDOM", "") in ("", "0"),
    database=None,
)
settings.load_profile("allot")

# A cluster with no adapter URL follows ALLOT_SIMCLUSTER_URL (default 127.0.0.1:8001, where
# `make run` serves its simulated cluster): tests point it at a closed port, so a demo
# running beside the suite never starts their jobs; a test that wants one sets its own.
os.environ["ALLOT_SIMCLUSTER_URL"] = "http://127.0.0.1:9"

# Modules whose tests run on one worker, by group. The local Slurm cluster is started
# once per worker that runs a Slurm test (`slurm_cluster`, session scope; each cluster has
# its own directory and ports), so its modules form two groups of about equal length: two
# clusters, on two workers, each carrying half of the Slurm tests (one group was the
# suite's critical path). The query-count module measures all its requests in one world
# built once per worker (`measured`), so it runs on one worker too. So do the modules whose
# tests share work kept for the process (`functools.cache`): the plan-hash recording's six
# simulator runs, each read by two tests (spread over workers, each worker ran them
# again), the layer checks' parsed sources of the project, and the database roles'
# migrated database.
XDIST_GROUPS = {
    "tests/adapters/slurm/test_cycle.py": "slurm-1",
    "tests/adapters/slurm/test_adapter.py": "slurm-1",
    "tests/adapters/slurm/test_utilization.py": "slurm-1",
    "tests/adapters/slurm/test_services.py": "slurm-1",
    "tests/adapters/slurm/test_governed.py": "slurm-2",
    "tests/adapters/slurm/test_governed_kills.py": "slurm-2",
    "tests/adapters/slurm/test_governed_owner.py": "slurm-2",
    "tests/test_query_counts.py": "query-counts",
    "tests/core/engine/test_plan_hash.py": "plan-hash",
    # the project's sources parsed once for both (tests/support/sources.py)
    "tests/test_layers.py": "layers",
    "tests/test_project.py": "layers",
    # the reach test counts the property's own run (400 examples) instead of a second one
    "tests/core/engine/test_idle_reclaim.py": "idle-reclaim",
    # one migrate and one set of roles (`roles`, module scope) for all of its tests
    "tests/ops/test_db_roles.py": "db-roles",
    # the rows' objects and sign-ins made once (`world`, module scope) for all its rows
    "tests/security/test_permissions.py": "permissions",
    # its bad-input cases share one simulated cluster process (`module_simcluster`, tests/adapters/simcluster/conftest.py)
    "tests/adapters/simcluster/test_cluster_add.py": "cluster-add",
    # its tests that keep their process share one (`module_simcluster`)
    "tests/adapters/simcluster/test_adapter.py": "sim-adapter",
}
# A fixture naming a per-worker resource -> the prefix of the groups its tests must be in.
GROUPED_FIXTURES = {"slurm_cluster": "slurm-"}


def xdist_group_of(nodeid: str) -> str | None:
    return XDIST_GROUPS.get(nodeid.split("::", 1)[0])


class ModuleGroupScheduling(LoadGroupScheduling):
    """`--dist loadgroup` with the groups of `XDIST_GROUPS` (a group is one unit of work,
    every other test a unit of its own), handed out longest first by the recorded
    durations (`tests/support/scheduling.py`). pytest-xdist 3.8 groups by the
    `xdist_group` mark through a suffix it writes into each test's id, which pytest 9.2's
    ids ignore: the mark no longer grouped anything.

    A worker runs a test only once it knows the next one (pytest's `nextitem`), so it
    always holds one unit ahead: while it is busy with a long one, that unit is the
    shortest left, not the next long one, which a worker that runs dry sooner takes."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        self.durations = load_durations()
        self.ranked = False

    def _split_scope(self, nodeid: str) -> str:
        return xdist_group_of(nodeid.split("@", 1)[0]) or super()._split_scope(nodeid)

    def _assign_work_unit(self, node) -> None:
        if not self.ranked:
            self.workqueue = longest_first(self.workqueue, self.durations)
            self.ranked = True
        held = self.assigned_work.get(node, {})
        if pending_s(held, self.durations) >= PREFETCH_S and len(self.workqueue) > 1:
            self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadgroup":
        return ModuleGroupScheduling(config, log)
    return None


# Each test's seconds (setup, call and teardown): the longest LONGEST_LISTED are listed
# at the end of every run (issue 23; `--durations` lists phases, and a test's setup and
# call can take two of its lines), and with ALLOT_RECORD_DURATIONS=tests/durations.json
# all are written there at the end of the run, for the scheduler above.
RECORD_DURATIONS = os.environ.get("ALLOT_RECORD_DURATIONS", "")
LONGEST_LISTED = 20
_recorded: dict[str, float] = {}
_per_worker: dict[str, float] = {}  # the balance: seconds of tests each worker ran


def pytest_runtest_logreport(report):
    _recorded[report.nodeid] = _recorded.get(report.nodeid, 0.0) + report.duration
    worker = getattr(getattr(report, "node", None), "gateway", None)
    name = getattr(worker, "id", "main")
    _per_worker[name] = _per_worker.get(name, 0.0) + report.duration


def pytest_sessionfinish(session):
    if RECORD_DURATIONS and _recorded and not hasattr(session.config, "workerinput"):
        write_durations(_recorded, Path(RECORD_DURATIONS), per_worker=_per_worker)


def pytest_terminal_summary(terminalreporter, config):
    if hasattr(config, "workerinput") or not _recorded:
        return
    longest = sorted(_recorded.items(), key=lambda item: -item[1])[:LONGEST_LISTED]
    terminalreporter.write_sep("=", f"longest {len(longest)} tests (setup + call + teardown)")
    for nodeid, seconds in longest:
        terminalreporter.write_line(f"{seconds:8.2f}s {nodeid}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture, prefix in GROUPED_FIXTURES.items():
            group = xdist_group_of(item.nodeid) or ""
            if fixture in getattr(item, "fixturenames", ()) and not group.startswith(prefix):
                raise pytest.UsageError(
                    f"{item.nodeid} uses {fixture}: add its module to a {prefix}* group "
                    "of XDIST_GROUPS in tests/conftest.py"
                )


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, django_db_blocker):
    """Each worker's test database copied from one migrated template instead of migrated
    again (tests/support/template_db.py)."""
    from django.db import connection

    with django_db_blocker.unblock():
        use_template(connection)


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
def tree(db) -> Tree:
    """The example tree of tests/factories.py, imported through the budget services."""
    return example_tree()


@pytest.fixture
def admin_user(db):
    return SuperUserFactory(username="root")


@pytest.fixture(autouse=True)
def _clear_test_cache(settings):
    """Empty the tests' keys in the Redis cache (sign-in failure counts, throttles)."""
    from django.core.cache import cache

    client = cache._cache.get_client(write=True)
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    # SCAN walks the whole database whatever the pattern, 10 keys a round trip by default:
    # 180 ms a test in a database another process filled with 16,000 keys, 6 ms by 1,000
    for key in client.scan_iter(f"{prefix}:*", count=1000):
        client.delete(key)


@pytest.fixture(autouse=True)
def _celery_app_stays_current():
    """A test that makes another Celery app current (``Celery(...)`` does unless told
    ``set_as_current=False``) would send every later test's tasks of this worker to that
    app, without the project's configuration: fail the test that did it, not a later one."""
    yield
    leaked = current_app._get_current_object()
    if leaked is not celery_app:
        celery_app.set_current()
        pytest.fail(f"the test left Celery app {leaked!r} current; pass set_as_current=False")
