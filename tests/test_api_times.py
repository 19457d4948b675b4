"""`config.api_times.api_time` writes a time as DRF's JSON encoder does."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from rest_framework.utils.encoders import JSONEncoder

from config.api_times import api_time

CET = dt.timezone(dt.timedelta(hours=1))


@pytest.mark.parametrize(
    "value",
    [
        dt.datetime(2026, 12, 6, 20, 0, tzinfo=dt.UTC),
        dt.datetime(2026, 12, 6, 20, 0, 1, 123456, tzinfo=dt.UTC),
        dt.datetime(2026, 12, 6, 21, 0, 1, 5, tzinfo=CET),
        dt.datetime(2026, 12, 6, 20, 0, 1),  # naive
        None,
    ],
)
def test_api_time_is_what_drfs_encoder_writes(value):
    assert json.dumps(api_time(value)) == json.dumps(value, cls=JSONEncoder)
