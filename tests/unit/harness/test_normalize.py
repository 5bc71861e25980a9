"""The golden-file normalizer: ordinal placeholders that keep referential integrity."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

from tests.e2e.harness.normalize import Normalizer, sort_rows

A = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
B = "6fa459ea-ee8a-3ca4-894e-db77e160355e"


def test_same_uuid_gets_the_same_placeholder_everywhere() -> None:
    data = {"a": {"id": A}, "b": [f"see {A} and {B}"], "c": uuid.UUID(B)}
    assert Normalizer().normalize(data) == {
        "a": {"id": "{UUID_1}"},
        "b": ["see {UUID_1} and {UUID_2}"],
        "c": "{UUID_2}",
    }


def test_placeholders_are_numbered_in_sorted_key_order() -> None:
    assert Normalizer().normalize({"z": A, "a": B}) == {"a": "{UUID_1}", "z": "{UUID_2}"}


def test_registered_and_keyed_ids_get_their_own_kind() -> None:
    normalizer = Normalizer()
    assert normalizer.register(B.upper(), "SESSION_ID") == "{SESSION_ID_1}"
    data = {"session_id": A, "other": B, "z_note": f"session {A}"}
    assert normalizer.normalize(data) == {
        "other": "{SESSION_ID_1}",
        "session_id": "{SESSION_ID_2}",
        "z_note": "session {SESSION_ID_2}",
    }


def test_one_instant_under_one_key_is_one_placeholder_whatever_its_spelling() -> None:
    moment = dt.datetime(2026, 11, 22, 6, 37, 33, 123456, tzinfo=dt.UTC)
    data = {
        "at": [
            moment,
            "2026-11-22T06:37:33.123456+00:00",
            "2026-11-22 07:37:33.123456+01:00",
            "2026-11-22T06:40:00Z",
        ]
    }
    assert Normalizer().normalize(data) == {
        "at": ["{TIMESTAMP_1}", "{TIMESTAMP_1}", "{TIMESTAMP_1}", "{TIMESTAMP_2}"]
    }


def test_coinciding_timestamps_of_different_columns_stay_apart() -> None:
    moment = dt.datetime(2026, 11, 22, 6, 37, 33, 123456, tzinfo=dt.UTC)
    data = {"created_at": moment, "measured_at": moment}
    assert Normalizer().normalize(data) == {
        "created_at": "{TIMESTAMP_1}",
        "measured_at": "{TIMESTAMP_2}",
    }


def test_json_text_in_strings_is_normalized_with_its_keys() -> None:
    moment = dt.datetime(2026, 11, 22, 6, 37, 33, tzinfo=dt.UTC)
    result = f'{{"id": "{A}", "created_at": "{moment.isoformat()}", "name": "Tomás"}}'
    data = {"content": result, "row": {"created_at": moment, "id": uuid.UUID(A)}}
    assert Normalizer().normalize(data) == {
        "content": '{"created_at": "{TIMESTAMP_1}", "id": "{UUID_1}", "name": "Tomás"}',
        "row": {"created_at": "{TIMESTAMP_1}", "id": "{UUID_1}"},
    }


def test_text_that_only_looks_like_json_is_kept_as_text() -> None:
    assert Normalizer().normalize(["{not json", "[1, 2]"]) == ["{not json", "[1, 2]"]


def test_dates_numbers_and_booleans_are_kept() -> None:
    data = {
        "birthday": dt.date(1990, 4, 12),
        "value": decimal.Decimal("81.40"),
        "count": decimal.Decimal("2"),
        "ok": True,
        "none": None,
    }
    assert Normalizer().normalize(data) == {
        "birthday": "1990-04-12",
        "count": 2,
        "none": None,
        "ok": True,
        "value": 81.4,
    }


def test_durations_trace_ids_ports_and_schema_prefixes_are_masked() -> None:
    data = {
        "duration_ms": 412,
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "url": "http://127.0.0.1:40813/mcp",
        "error": 'relation "e2e_t1a2b3_health.measurements" does not exist',
    }
    assert Normalizer().normalize(data) == {
        "duration_ms": "{DURATION_MS}",
        "error": 'relation "{SCHEMA_PREFIX}health.measurements" does not exist',
        "trace_id": "{TRACE_ID_1}",
        "url": "http://127.0.0.1:{PORT}/mcp",
    }


def test_a_missing_duration_stays_null() -> None:
    assert Normalizer().normalize({"duration_ms": None}) == {"duration_ms": None}


def test_dumps_is_indented_sorted_json_with_a_final_newline() -> None:
    text = Normalizer().dumps({"b": 1, "a": [A]})
    assert text == '{\n  "a": [\n    "{UUID_1}"\n  ],\n  "b": 1\n}\n'


def test_sort_rows_ignores_volatile_values() -> None:
    late = {"id": A, "name": "apple", "at": dt.datetime(2030, 1, 1, tzinfo=dt.UTC)}
    early = {"id": B, "name": "pear", "at": dt.datetime(2020, 1, 1, tzinfo=dt.UTC)}
    assert sort_rows([early, late]) == [late, early]
    assert sort_rows([late, early]) == [late, early]
