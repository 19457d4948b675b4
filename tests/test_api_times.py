"""`config.api_times.api_time` writes a time as DRF's JSON encoder does; `api_times` as
`api_time` does each."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from rest_framework.utils.encoders import JSONEncoder

from config.api_times import api_time, api_times

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


def test_api_times_are_api_time_of_each_even_for_one_instant_in_two_zones():
    noon = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
    values = [
        noon,
        noon.astimezone(CET),  # the same instant, another offset: another text
        dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC),  # equal to the first
        None,
        noon.replace(tzinfo=None),  # naive
        noon + dt.timedelta(microseconds=1),
        noon,
    ]
    assert api_times(values) == [api_time(v) for v in values]
    assert api_times(values)[0] != api_times(values)[1]
