"""The SSE broker: ids, replay after Last-Event-ID, resync, slow subscribers."""

from __future__ import annotations

from butlers.dashboard.events import EventBroker


def test_replay_sends_only_what_came_after_the_last_seen_id() -> None:
    broker = EventBroker(buffer_size=10)
    events = [broker.publish("session_start", {"n": i}) for i in range(5)]
    _sub, replay, resync = broker.subscribe(str(events[1].id))
    assert [e.data["n"] for e in replay] == [2, 3, 4] and not resync
    _sub, replay, resync = broker.subscribe(str(events[-1].id))
    assert replay == [] and not resync


def test_an_id_older_than_the_buffer_or_unknown_asks_for_a_resync() -> None:
    broker = EventBroker(buffer_size=3)
    events = [broker.publish("x", {"n": i}) for i in range(6)]
    _sub, replay, resync = broker.subscribe(str(events[0].id))
    assert resync and [e.data["n"] for e in replay] == [3, 4, 5]
    assert broker.subscribe("not-a-number")[2]
    assert broker.subscribe(str(events[-1].id + 100))[2]
    assert not broker.subscribe(None)[2]


def test_a_subscriber_that_falls_behind_is_dropped_with_an_end_marker() -> None:
    broker = EventBroker(queue_size=2)
    sub, _replay, _resync = broker.subscribe(None)
    for i in range(3):
        broker.publish("x", {"n": i})
    assert sub.dropped and broker.subscriber_count == 0
    assert sub.queue.get_nowait() is None


def test_events_are_masked_and_encoded_as_sse() -> None:
    broker = EventBroker(mask=lambda data: {**data, "secret": "[REDACTED]"})
    event = broker.publish("state_changed", {"key": "k", "secret": "s3cr3t"})
    text = event.encode().decode()
    assert text.startswith(f"id: {event.id}\nevent: state_changed\ndata: ")
    assert text.endswith("\n\n") and "s3cr3t" not in text


def test_the_schema_publishes_every_event_type_of_the_stream() -> None:
    """`SseEvent.type` in the OpenAPI schema (from which the web UI derives its list) is
    the stream's vocabulary, and every module's change source publishes only its words."""
    from butlers.dashboard.app import create_app
    from butlers.dashboard.events import EVENT_TYPES
    from butlers.modules.views import all_module_views

    schema = create_app().openapi()
    published = schema["components"]["schemas"]["SseEvent"]["properties"]["type"]["enum"]
    assert tuple(published) == EVENT_TYPES
    events = schema["paths"]["/api/events"]["get"]["responses"]["200"]["content"]
    assert events["text/event-stream"]["schema"]["$ref"] == "#/components/schemas/SseEvent"
    for module in all_module_views():
        for source in module.changes:
            used = {*source.events.values(), source.default, source.start[0]}
            assert used <= set(EVENT_TYPES), f"{module.module}: {used - set(EVENT_TYPES)}"
