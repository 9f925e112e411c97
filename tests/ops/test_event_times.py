"""stream_sink.ops.source_positions: the event times the command line takes (ISO-8601 or
epoch milliseconds, refused otherwise with what to pass) and prints (ISO, UTC)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from stream_sink.exceptions import InvalidOptionError
from stream_sink.ops.source_positions import event_time_ms, iso_time, parse_event_time

MS = 1_714_651_200_000  # 2024-05-02T12:00:00Z


@pytest.mark.parametrize(
    "text",
    [
        "2024-05-02T12:00:00Z",
        "2024-05-02T12:00:00z",
        "2024-05-02T12:00:00",
        "2024-05-02 12:00:00+00:00",
        "2024-05-02T14:00:00+02:00",
        "2024-05-02T12:00:00.000Z",
        str(MS),
        f" {MS} ",
    ],
)
def test_an_event_time_is_iso_8601_or_epoch_ms(text: str) -> None:
    assert parse_event_time(text) == MS


def test_a_date_is_its_midnight_in_utc_and_negative_ms_are_before_1970() -> None:
    assert parse_event_time("2024-05-02") == MS - 12 * 3_600_000
    assert parse_event_time("-5") == -5


@pytest.mark.parametrize("text", ["", "soon", "12:00", "2024-13-01", "1e12", "2024-05-02T25"])
def test_anything_else_is_refused_naming_the_option(text: str) -> None:
    with pytest.raises(InvalidOptionError, match=r"--complete-up-to .*ISO-8601.*epoch"):
        parse_event_time(text)


def test_times_print_as_iso_in_utc() -> None:
    assert iso_time(MS) == "2024-05-02T12:00:00.000Z"
    assert iso_time(MS + 7) == "2024-05-02T12:00:00.007Z"
    assert iso_time(None) is None
    later = datetime(2024, 5, 2, 14, tzinfo=timezone(timedelta(hours=2)))
    assert event_time_ms(later) == MS
