# The world of hosts, health events, jobs and attempts that the rollup tests build is
# shared with the API tests of this folder.
from tests.ledger.test_rollups import world  # noqa: F401
