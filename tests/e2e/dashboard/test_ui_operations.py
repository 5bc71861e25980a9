"""The operator's pages in a real browser: traces of messages, who asked for a held call,
the tool form (from the tool's schema, a held call waiting, then its result), row
counts, degraded butlers, restarts and sessions by kind. Fixtures and helpers are the
browser suite's (test_ui.py)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import Script, call, step

from ..harness.ecosystem import EcosystemHandle
from .test_ui import Watcher, _open, _pending_listed, _shot
from .test_ui import browser as browser  # the browser suite's fixtures
from .test_ui import ui as ui


async def _send(butler_ecosystem: EcosystemHandle, llm_script: Script, text: str) -> str:
    """A message routed to health (which logs a weight); its request id."""
    llm_script.route(
        "switchboard",
        step(json.dumps([{"butler": "health", "prompt": f"Log {text}", "segment": text}])),
    )
    llm_script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=80.5, unit="kg")]),
        step("Logged 80.5 kg."),
    )
    envelope = build_envelope(text, channel="telegram", provider="telegram", sender="ui-test")
    result = await butler_ecosystem.call(
        "switchboard", "ingest_v1", {"envelope": envelope.model_dump(mode="json"), "wait": True}
    )
    assert result["fanout_status"] == "completed", result
    return str(result["request_id"])


async def test_a_message_is_one_trace_with_its_text_and_sessions_split_by_kind(
    ui: tuple[Any, Watcher],
    butler_ecosystem: EcosystemHandle,
    llm_script: Script,
) -> None:
    page, watcher = ui
    text = f"Log my weight {uuid.uuid4().hex[:6]}"
    request_id = await _send(butler_ecosystem, llm_script, text)
    await _open(page, "/traces")
    row = page.get_by_role("table", name="Traces").locator("tr", has_text=text)
    await row.wait_for()
    assert "health → switchboard" in (await row.text_content() or "")
    await row.get_by_role("link", name=re.compile("^Trace ")).click()
    waterfall = page.get_by_role("table", name="Trace waterfall")
    await waterfall.wait_for()
    await waterfall.locator("tr[data-kind='message'][data-butler='switchboard']").wait_for()
    await waterfall.locator("tr[data-kind='classification']").wait_for()
    await waterfall.locator("tr[data-kind='session'][data-butler='health']").wait_for()
    await page.screenshot(path=_shot("trace_of_a_message"), full_page=True)

    await _open(page, "/sessions")
    tabs = page.get_by_role("tablist", name="Kinds of session")
    await tabs.get_by_role("tab", name=re.compile("^Classifier")).click()
    # Until the list is the filtered one (the previous page stays while it loads).
    await page.locator("tr[data-session]:not([data-kind='classification'])").first.wait_for(
        state="detached"
    )
    await page.locator("tr[data-session]", has_text=f"classify:{request_id}").wait_for()
    kinds = await page.locator("tr[data-session]").evaluate_all(
        "rows => rows.map(r => r.dataset.kind)"
    )
    assert kinds and set(kinds) == {"classification"}, kinds
    await tabs.get_by_role("tab", name=re.compile("^Messages")).click()
    await page.locator("tr[data-session]:not([data-kind='message'])").first.wait_for(
        state="detached"
    )
    await page.locator("tr[data-session][data-kind='message']", has_text=text).wait_for()
    kinds = await page.locator("tr[data-session]").evaluate_all(
        "rows => rows.map(r => r.dataset.kind)"
    )
    assert set(kinds) == {"message"}, kinds
    assert await tabs.get_by_role("tab", selected=True).text_content() == (
        await tabs.get_by_role("tab", name=re.compile("^Messages")).text_content()
    )
    await page.screenshot(path=_shot("sessions_by_kind"), full_page=True)
    assert watcher.problems == []


async def test_an_approvals_session_link_opens_that_session(
    ui: tuple[Any, Watcher],
    butler_ecosystem: EcosystemHandle,
    llm_script: Script,
) -> None:
    page, watcher = ui
    contact = await butler_ecosystem.call("relationship", "contact_add", {"name": "UI Link"})
    contact_id = str(contact["id"])
    llm_script.route(
        "relationship",
        step(tool_calls=[{"name": "contact_delete", "arguments": {"contact_id": contact_id}}]),
        step("Deleted."),
    )
    # The page has read the queue before the call is held (the request is then listed
    # live), and the test acts at once: the ecosystem's approvals expire in seconds.
    await _open(page, "/approvals")
    await _pending_listed(page)
    session = asyncio.create_task(
        butler_ecosystem.call("relationship", "trigger", {"prompt": f"Delete {contact_id}"})
    )
    try:
        item = page.locator("li.approval", has_text=contact_id)
        await item.wait_for(timeout=20_000)
        link = item.get_by_role("link", name=re.compile("^session "))
        href = await link.get_attribute("href") or ""
        await link.click()
        await page.get_by_role("heading", name=re.compile("^Session")).wait_for()
        session_id = href.rsplit("/", 1)[-1]
        assert re.fullmatch(r"[0-9a-f-]{36}", session_id) and page.url.endswith(href), href
        await page.locator("dt:text-is('Trigger') + dd", has_text="trigger").wait_for()
        await page.screenshot(path=_shot("approval_session_link"), full_page=True)
        result = await asyncio.wait_for(session, 30)  # approved or expired, it ends
        assert result["session_id"] == session_id
    finally:
        if not session.done():
            session.cancel()
    # A direct call (no butler session behind it) names its MCP client and links nowhere.
    await _open(page, "/approvals")
    await _pending_listed(page)
    other = await butler_ecosystem.call("relationship", "contact_add", {"name": "UI Direct"})
    direct = asyncio.create_task(
        butler_ecosystem.call("relationship", "contact_delete", {"contact_id": str(other["id"])})
    )
    try:
        item = page.locator("li.approval", has_text=str(other["id"]))
        await item.get_by_text("by an MCP client").wait_for()
        assert await item.get_by_role("link").count() == 0
    finally:
        await asyncio.gather(direct, return_exceptions=True)  # expires unanswered
    assert watcher.problems == []


async def test_the_tool_form_is_built_from_the_schema_with_a_json_mode(
    ui: tuple[Any, Watcher],
    butler_ecosystem: EcosystemHandle,
) -> None:
    page, watcher = ui
    subject = f"ui-form-{uuid.uuid4().hex[:6]}"
    await _open(page, "/butlers/health/tools")
    await page.get_by_role("button", name="Try memory_store_fact").click()
    form = page.get_by_role("form", name="Call memory_store_fact")
    fields = form.get_by_role("group", name="Arguments of memory_store_fact")
    kinds = await fields.locator("[data-field]").evaluate_all(
        "els => Object.fromEntries(els.map(e => [e.dataset.field, e.dataset.kind]))"
    )
    assert kinds["subject"] == "string" and kinds["importance"] == "number", kinds
    assert kinds["permanence"] == "enum" and kinds["tags"] == "json", kinds
    await form.get_by_role("button", name="Call memory_store_fact").click()
    assert "subject is required" in await form.get_by_role("alert").inner_text()
    await form.get_by_label("subject of memory_store_fact").fill(subject)
    await form.get_by_label("predicate of memory_store_fact").fill("colour")
    await form.get_by_label("content of memory_store_fact").fill("green")
    await form.get_by_label("importance of memory_store_fact").fill("0.8")
    await form.get_by_label("permanence of memory_store_fact").select_option(label="stable")
    await form.get_by_label("tags of memory_store_fact (JSON)").fill('["ui"]')
    # JSON mode carries the values across, and back.
    await form.get_by_label("Edit the arguments of memory_store_fact as JSON").check()
    box = form.get_by_label("Arguments of memory_store_fact (JSON object)")
    assert json.loads(await box.input_value()) == {
        "subject": subject,
        "predicate": "colour",
        "content": "green",
        "importance": 0.8,
        "permanence": "stable",
        "tags": ["ui"],
    }
    await box.fill((await box.input_value()).replace("green", "teal"))
    await form.get_by_label("Edit the arguments of memory_store_fact as JSON").uncheck()
    assert await form.get_by_label("content of memory_store_fact").input_value() == "teal"
    await form.get_by_role("button", name="Call memory_store_fact").click()
    result = form.get_by_role("status", name="Result of memory_store_fact")
    await result.wait_for()
    stored = json.loads(await result.locator("pre").inner_text())
    assert (stored["subject"], stored["content"], stored["permanence"]) == (
        subject,
        "teal",
        "stable",
    )
    assert stored["tags"] == ["ui"] and round(stored["importance"], 3) == 0.8  # a float4
    await page.screenshot(path=_shot("tool_form"), full_page=True)
    assert watcher.problems == []


async def test_a_tool_call_held_for_approval_says_so_links_to_it_and_shows_its_result(
    ui: tuple[Any, Watcher],
    butler_ecosystem: EcosystemHandle,
) -> None:
    """The ecosystem's approvals expire after a few seconds: the test acts at once."""
    page, watcher = ui
    contact = await butler_ecosystem.call("relationship", "contact_add", {"name": "UI Form Held"})
    contact_id = str(contact["id"])
    await _open(page, "/butlers/relationship/tools")
    await page.get_by_role("button", name="Try contact_delete").click()
    form = page.get_by_role("form", name="Call contact_delete")
    await form.get_by_label(re.compile("^contact_id of contact_delete")).fill(contact_id)
    await form.get_by_role("button", name="Call contact_delete").click()
    progress = form.get_by_role("status", name="Progress of contact_delete")
    await progress.get_by_text("Waiting for approval").wait_for()
    link = progress.get_by_role("link", name=re.compile("^Open approval "))
    href = await link.get_attribute("href") or ""
    approval_id = await progress.get_attribute("data-approval")
    assert href == f"/approvals#approval-{approval_id}", href
    # The link opens the request (another tab: this one keeps waiting for the result).
    other = await page.context.new_page()
    try:
        await other.goto(href)
        item = other.locator(f"li.approval#approval-{approval_id}")
        await item.wait_for()
        shown = await item.evaluate("e => [e.className, e.textContent]")
        await item.get_by_role("button", name=re.compile("^Approve")).click()
        await item.wait_for(state="detached")
        assert "highlight" in shown[0] and contact_id in shown[1], shown
        assert "from this dashboard's tool form" in shown[1], shown
    finally:
        await other.close()
    result = form.get_by_role("status", name="Result of contact_delete")
    await result.wait_for()  # live: the held call answered once approved
    assert json.loads(await result.locator("pre").inner_text()) == {
        "contact_id": contact_id,
        "deleted": True,
    }
    await progress.wait_for(state="detached")
    assert watcher.problems == []


async def test_the_data_tab_shows_real_row_counts(
    ui: tuple[Any, Watcher],
    butler_ecosystem: EcosystemHandle,
) -> None:
    page, watcher = ui
    await butler_ecosystem.call(
        "health", "measurement_log", {"type": "weight", "value": 70, "unit": "kg"}
    )
    pool = await butler_ecosystem.pool("health")
    exact = await pool.fetchval("SELECT count(*) FROM measurements")
    await _open(page, "/butlers/health/tables")
    button = page.get_by_role("list", name="Tables").get_by_role(
        "button", name=re.compile("^measurements ")
    )
    count = button.locator("[data-rows]")
    assert (await count.text_content() or "").strip() == f"{exact:,} row{'s' * (exact != 1)}"
    assert exact > 0
    assert watcher.problems == []


async def test_a_degraded_butler_shows_the_reason_on_every_page(
    ui: tuple[Any, Watcher],
) -> None:
    page, watcher = ui
    await _open(page, "/")
    card = page.locator("article[data-butler='messenger']")
    await card.locator(".badge[data-status='degraded']").wait_for()
    assert "module email failed (credentials)" in (await card.locator(".reason").inner_text())
    await _open(page, "/butlers/messenger")
    await page.locator("h1 .badge[data-status='degraded']").wait_for()
    assert "EMAIL_USERNAME" in await page.locator("p.reason").inner_text()
    await _open(page, "/issues")
    failed = page.locator("li.issue", has_text="module email of messenger is failed")
    await failed.wait_for()
    assert "severity-warning" in (await failed.get_attribute("class") or "")
    await page.screenshot(path=_shot("degraded_butler"), full_page=True)
    assert watcher.problems == []


async def test_a_restarted_butler_shows_its_restarts(
    ui: tuple[Any, Watcher],
    butler_ecosystem: EcosystemHandle,
) -> None:
    page, watcher = ui
    await butler_ecosystem.kill("relationship")
    await butler_ecosystem.restart("relationship")
    await _open(page, "/butlers/relationship")
    restarts = page.locator("dt:text-is('Restarts') + dd .restarts")
    await restarts.wait_for(timeout=30_000)
    assert "after a crash" in await restarts.inner_text()
    await _open(page, "/")
    card = page.locator("article[data-butler='relationship']")
    await card.locator(".restarts", has_text="after a crash").wait_for()
    # A read that failed while the butler was away is the test's doing, not the UI's.
    watcher.problems = [p for p in watcher.problems if "/api/" not in p]
    assert watcher.problems == []
