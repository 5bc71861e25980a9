"""Domain modules' tools against their own tables."""

from .conftest import ButlerFactory


async def test_blood_pressure_is_stored_as_an_object(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"health": {}})
    await butler.call(
        "measurement_log",
        {"type": "Blood Pressure", "value": {"systolic": 120, "diastolic": 80}, "unit": "mmHg"},
    )
    latest = await butler.call("measurement_latest", {"type": "blood_pressure"})
    assert latest["value"] == {"systolic": 120, "diastolic": 80}
    assert latest["unit"] == "mmHg"


async def test_measurement_range_selects_by_time(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"health": {}})
    for day, kg in ((1, 81.0), (2, 80.5), (3, 80.0)):
        await butler.call(
            "measurement_log",
            {
                "type": "weight",
                "value": kg,
                "unit": "kg",
                "measured_at": f"2026-01-0{day}T08:00:00Z",
            },
        )
    rows = await butler.call(
        "measurement_range",
        {"type": "weight", "start": "2026-01-02T00:00:00Z", "end": "2026-01-04T00:00:00Z"},
    )
    assert [r["value"] for r in rows] == [80.0, 80.5]
    assert (await butler.call("measurement_latest", {"type": "weight"}))["value"] == 80.0


async def test_medication_dose_updates_last_taken(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"health": {}})
    med = await butler.call("medication_add", {"name": "Ibuprofen", "dosage": "200 mg"})
    await butler.call("medication_log_dose", {"medication_id": med["id"]})
    [listed] = await butler.call("medication_list", {})
    assert listed["name"] == "Ibuprofen" and listed["last_taken_at"] is not None


async def test_symptoms_are_listed_newest_first(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"health": {}})
    await butler.call("symptom_log", {"name": "headache", "severity": 4})
    await butler.call("symptom_log", {"name": "cough"})
    assert [s["name"] for s in await butler.call("symptom_list", {})] == ["cough", "headache"]


async def test_contact_create_is_an_alias_of_contact_add(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"approvals": {}, "contacts": {}})
    await butler.call("contact_create", {"name": "Sarah Johnson", "email": "sarah@example.org"})
    [found] = await butler.call("contact_search", {"query": "sarah"})
    assert found["email"] == "sarah@example.org"


async def test_contact_get_includes_notes_and_interactions(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"approvals": {}, "contacts": {}})
    contact = await butler.call("contact_add", {"name": "Tom"})
    await butler.call("contact_note_add", {"contact_id": contact["id"], "body": "likes tea"})
    await butler.call("interaction_log", {"contact_id": contact["id"], "kind": "call"})
    full = await butler.call("contact_get", {"contact_id": contact["id"]})
    assert [n["body"] for n in full["notes"]] == ["likes tea"]
    assert [i["kind"] for i in full["interactions"]] == ["call"]


async def test_notes_are_filed_in_collections(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"general": {}})
    await butler.call("note_add", {"title": "milk", "collection": "groceries", "tags": ["food"]})
    await butler.call("note_add", {"title": "call mum"})
    assert [n["title"] for n in await butler.call("note_list", {"collection": "groceries"})] == [
        "milk"
    ]
    names = {c["name"]: c["notes"] for c in await butler.call("collection_list", {})}
    assert names == {"groceries": 1, "inbox": 1}


async def test_note_search_matches_percent_and_underscore_literally(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"general": {}})
    for title, body in (("sale", "50% off"), ("plain", "nothing special"), ("id", "a_b")):
        await butler.call("note_add", {"title": title, "body": body})
    await butler.call("note_add", {"title": "axb", "body": ""})

    async def titles(query: str) -> set[str]:
        return {n["title"] for n in await butler.call("note_list", {"query": query})}

    assert await titles("%") == {"sale"}
    assert await titles("a_b") == {"id"}
    assert await titles("_") == {"id"}
    assert await titles("SPECIAL") == {"plain"}


async def test_contact_search_matches_wildcards_literally(module_butler: ButlerFactory) -> None:
    butler = await module_butler({"approvals": {}, "contacts": {}})
    await butler.call("contact_add", {"name": "Ann_Lee"})
    await butler.call("contact_add", {"name": "Annxlee"})
    assert [c["name"] for c in await butler.call("contact_search", {"query": "n_l"})] == ["Ann_Lee"]
    assert await butler.call("contact_search", {"query": "%"}) == []


async def test_ids_that_are_not_uuids_are_refused_naming_the_argument(
    module_butler: ButlerFactory,
) -> None:
    butler = await module_butler({"general": {}, "health": {}})
    for tool, argument in (
        ("note_delete", "note_id"),
        ("medication_log_dose", "medication_id"),
        ("sessions_get", "session_id"),
    ):
        result = await butler.call_raw(tool, {argument: "not-a-uuid"})
        assert result.is_error, tool
        assert argument in result.content[0].text and "UUID" in result.content[0].text
