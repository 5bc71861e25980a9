"""The web UI in a real browser (headless Chromium driven by Playwright) over the
ecosystem's own dashboard: pages update live, writes go through, and no page logs a
console error, fails a request or sends one off the dashboard's origin. Screenshots go
to `.tmp/screenshots/`."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx
import pytest

from butlers.dashboard.logins import login_url
from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import Script, call, step
from butlers.waiting import wait_until

from ..conftest import ROOT
from ..harness.ecosystem import EcosystemHandle
from ..harness.env import CALDAV_SERVER, CALDAV_UNREACHABLE
from .conftest import extra_dashboard

SHOTS = ROOT / ".tmp" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
PAGES = [
    ("/", "Overview"),
    ("/conversations", "Conversations"),
    ("/sessions", "Sessions"),
    ("/traces", "Traces"),
    ("/approvals", "Approvals"),
    ("/memory", "Memory"),
    ("/calendar", "Calendar"),
    ("/costs", "Costs"),
    ("/issues", "Issues"),
    ("/notifications", "Notifications"),
    ("/triage", "Triage"),
    ("/reminders", "Reminders"),
    ("/audit", "Audit log"),
    ("/secrets", "Secrets"),
    ("/search", "Search"),
    ("/butlers/general", "general"),
    ("/butlers/general/state", "general"),
    ("/butlers/general/schedules", "general"),
    ("/butlers/general/tools", "general"),
    ("/butlers/general/modules", "general"),
    ("/butlers/general/tables", "general"),
    ("/butlers/general/config", "general"),
    ("/butlers/general/logs", "general"),
    ("/butlers/general/actions", "general"),
]
WAIT_MS = 10_000


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip(
            "Chromium is not installed: `python3 dev.py test` installs the Debian `chromium` "
            "package when run as root; otherwise `apt-get install chromium`"
        )
    return found


# The web UI is the same files over the same API on every backend; the cluster backends
# run the API suite over the chart's dashboard, the browser tests run once, on local.
UI_BACKEND = "local"


@pytest.fixture(scope="session")
async def browser(butler_ecosystem: EcosystemHandle) -> AsyncIterator[Any]:
    if butler_ecosystem.backend != UI_BACKEND:
        pytest.skip(
            f"the browser tests run on the {UI_BACKEND} backend only (the UI does not depend "
            "on how the butlers were started)"
        )
    executable = _chromium()
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip("the playwright package is missing: `python3 dev.py setup` installs it")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


class Watcher:
    """What a page did wrong: console errors, failed or refused requests, other origins."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.problems: list[str] = []

    def attach(self, page: Any) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("request", self._request)
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.problems.append(f"console error: {message.text}")

    def _request(self, request: Any) -> None:
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https") and f"{parts.scheme}://{parts.netloc}" != self.origin:
            self.problems.append(f"request left the origin: {request.url}")

    def _failed(self, request: Any) -> None:
        # Leaving a page aborts its event stream (and an icon still loading), and a read
        # that a newer read of the same query supersedes (an event invalidates it while
        # it is in flight) is aborted by TanStack Query: the browser and the app working,
        # not a failure. An aborted write still counts.
        navigated = request.url.endswith(("/api/events", "/favicon.svg"))
        superseded = request.method == "GET" and "/api/" in request.url
        if (navigated or superseded) and "ERR_ABORTED" in (request.failure or ""):
            return
        self.problems.append(f"request failed: {request.method} {request.url} {request.failure}")

    def _response(self, response: Any) -> None:
        if response.status >= 400:
            method = response.request.method
            self.problems.append(f"HTTP {response.status}: {method} {response.url}")


@pytest.fixture
async def ui(
    browser: Any, butler_ecosystem: EcosystemHandle, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Any, Watcher]]:
    if butler_ecosystem.dashboard_url is None:
        pytest.skip(f"the {butler_ecosystem.backend} backend runs no dashboard")
    base = butler_ecosystem.dashboard_url.rstrip("/")
    context = await browser.new_context(base_url=base, viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(WAIT_MS)
    watcher = Watcher(base)
    watcher.attach(page)
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    if butler_ecosystem.dashboard_token:  # signed in as a user is: the link `butlers up` prints
        await page.goto(login_url(f"{base}/", butler_ecosystem.dashboard_token))
        await page.get_by_role("button", name="Sign out").wait_for()
        await page.wait_for_load_state("networkidle")  # the test's first page aborts nothing
    try:
        yield page, watcher
    finally:
        SHOTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        await context.close()


async def _open(page: Any, path: str) -> None:
    await page.goto(path)
    await page.get_by_role("heading", level=1).first.wait_for()


def _shot(name: str) -> str:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return str(SHOTS / f"{name}.png")


async def _unnamed_controls(page: Any) -> list[str]:
    """Buttons, links, inputs and selects without an accessible name."""
    return list(
        await page.evaluate(
            """() => [...document.querySelectorAll('button, a[href], input, select, textarea')]
            .filter(el => {
                const label = el.getAttribute('aria-label') || el.getAttribute('title')
                    || (el.labels && [...el.labels].map(l => l.textContent).join(' '))
                    || (el.tagName === 'INPUT' ? '' : el.textContent);
                return !(label && label.trim());
            })
            .map(el => el.outerHTML.slice(0, 120))"""
        )
    )


async def test_every_page_renders_without_errors_and_names_its_controls(
    ui: tuple[Any, Watcher],
) -> None:
    page, watcher = ui
    for path, heading in PAGES:
        await _open(page, path)
        title = await page.get_by_role("heading", level=1).first.text_content()
        assert heading in (title or ""), (path, title)
        await page.wait_for_load_state("networkidle")
        assert await page.locator("[role=alert]").count() == 0, (
            path,
            await page.locator("[role=alert]").all_text_contents(),
        )
        assert await _unnamed_controls(page) == [], path
        await page.screenshot(path=_shot("page" + path.replace("/", "_")), full_page=True)
    assert watcher.problems == []


async def test_overview_shows_healthy_butlers_and_a_killed_one_goes_down_live(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    await _open(page, "/")
    names = butler_ecosystem.names
    for name in names:
        card = page.locator(f"article[data-butler='{name}']")
        # The messenger's e-mail module has no credentials in the test ecosystem.
        expected = "degraded" if name == "messenger" else "ok"
        await card.locator(f".badge[data-status='{expected}']").wait_for()
    assert await page.locator("article[data-butler]").count() == len(names)
    await page.get_by_role("status", name="Live updates: live").wait_for()
    await butler_ecosystem.kill("general")
    try:
        card = page.locator("article[data-butler='general']")
        # No reload: the butler_status event makes the overview stale.
        await card.locator(".badge[data-status='down']").wait_for(timeout=20_000)
        assert (await card.locator(".badge").text_content() or "").strip().endswith("down")
        assert await card.locator(".reason").text_content()
        await page.get_by_text(re.compile(r"general is down")).first.wait_for()
        await page.screenshot(path=_shot("overview_general_down"), full_page=True)
    finally:
        await butler_ecosystem.restart("general")
    await page.locator("article[data-butler='general'] .badge[data-status='ok']").wait_for(
        timeout=30_000
    )
    # The dead butler's failed reads are the test's doing, not the UI's.
    watcher.problems = [p for p in watcher.problems if "/api/" not in p]
    assert watcher.problems == []


async def test_a_sent_message_appears_live_with_its_tool_calls_cost_and_trace(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    page, watcher = ui
    marker = f"weight {uuid.uuid4().hex[:6]}"
    llm_script.route(
        "switchboard",
        step(json.dumps([{"butler": "health", "prompt": f"Log {marker}", "segment": marker}])),
    )
    llm_script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=80.5, unit="kg")]),
        step("Logged 80.5 kg."),
    )
    await _open(page, "/sessions")
    await page.get_by_label("Butler").select_option("health")
    await page.get_by_role("status", name="Live updates: live").wait_for()
    envelope = build_envelope(
        f"Log my {marker}", channel="telegram", provider="telegram", sender="ui-test"
    )
    result = await butler_ecosystem.call(
        "switchboard", "ingest_v1", {"envelope": envelope.model_dump(mode="json"), "wait": True}
    )
    assert result["fanout_status"] == "completed", result
    row = page.locator("tr[data-session]", has_text=f"Log {marker}")
    await row.wait_for()  # appeared without a reload (session events)
    session_id = await row.get_attribute("data-session")
    pool = await butler_ecosystem.pool("health")
    await pool.execute(
        "UPDATE sessions SET cost_usd = $2, model = 'priced-model' WHERE session_id = $1::uuid",
        session_id,
        Decimal("0.0123"),
    )
    await row.get_by_role("link").click()
    await page.get_by_role("heading", name=re.compile("^Session")).wait_for()
    tool = page.locator("li[data-tool='measurement_log']")
    await tool.wait_for()
    assert "ok" in (await tool.locator(".badge").text_content() or "")
    await page.get_by_text("$0.0123").wait_for()
    await page.get_by_text(f"Log {marker}", exact=True).wait_for()
    await page.screenshot(path=_shot("session_detail"), full_page=True)
    await page.locator("dt:text-is('Trace') + dd a").click()
    await page.get_by_role("table", name="Trace waterfall").wait_for()
    switchboard_rows = page.locator("tr[data-butler='switchboard']")
    health_session = page.locator("tr[data-kind='session'][data-butler='health']")
    await health_session.wait_for()
    assert await switchboard_rows.count() >= 1
    assert await page.locator("tr[data-kind='tool_call']", has_text="measurement_log").count() == 1
    await page.screenshot(path=_shot("trace_waterfall"), full_page=True)
    assert watcher.problems == []


async def test_the_owner_writes_from_the_conversations_page_and_the_answer_appears_live(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    page, watcher = ui
    marker = uuid.uuid4().hex[:8]
    text = f"Log my weight 76.6 kg ({marker})"
    plan = [{"butler": "health", "prompt": f"Log 76.6 kg ({marker})", "segment": text}]
    llm_script.route("switchboard", step(json.dumps(plan)), when=marker)
    llm_script.route(
        "health",
        step(tool_calls=[call("measurement_log", type="weight", value=76.6, unit="kg")]),
        step(f"Logged 76.6 kg ({marker})."),
        when=marker,
    )
    await _open(page, "/conversations")
    await page.get_by_role("status", name="Live updates: live").wait_for()
    form = page.get_by_role("form", name="Write as the owner")
    await form.get_by_label("Write to your butlers (as the owner)").fill(text)
    await form.get_by_role("button", name="Send").click()
    message = page.locator("article.conversation", has_text=text)
    # No reload: the message's and the sessions' events make the page stale.
    await message.get_by_text(f"Logged 76.6 kg ({marker}).").wait_for(timeout=30_000)
    await message.locator(".badge", has_text="reply sent").wait_for()
    route = message.locator("li[data-route='health']")
    assert "measurement_log" in (await route.text_content() or "")
    await page.screenshot(path=_shot("conversation_answered"), full_page=True)
    await route.get_by_role("link", name=re.compile("^Session .* on health$")).click()
    await page.get_by_role("heading", name=re.compile("^Session")).wait_for()
    await page.locator("li[data-tool='measurement_log']").wait_for()
    assert watcher.problems == []


async def test_a_quarantined_message_is_dropped_and_connectors_shown_from_the_ui(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle, telegram_stand_in: Any
) -> None:
    from ..harness.telegram import STRANGER

    page, watcher = ui
    text = f"Wire me 500 euros ({uuid.uuid4().hex[:8]})"
    await _open(page, "/conversations")
    await page.get_by_role("status", name="Live updates: live").wait_for()
    telegram_stand_in.says(text, user_id=STRANGER)
    message = page.locator("article.conversation", has_text=text)
    group = message.get_by_role("group", name=f"Quarantined message from {STRANGER}")
    await group.wait_for(timeout=30_000)  # appeared live
    assert "is not an owner" in (await group.text_content() or "")
    await group.get_by_role("button", name="Drop").click()
    await message.locator(".badge[data-status='dropped']").wait_for()
    await group.wait_for(state="detached")
    connectors = page.get_by_role("table", name="Connectors")
    await connectors.locator("tr[data-connector='telegram']").wait_for()
    await _open(page, "/")
    await (
        page.get_by_role("table", name="Connectors")
        .locator("tr[data-connector='telegram']")
        .wait_for()
    )
    assert watcher.problems == []


async def _pending_listed(page: Any) -> None:
    """Until the page's first read of the pending approvals has arrived."""
    empty = page.get_by_text("Nothing waits for approval.")
    await empty.or_(page.get_by_role("list", name="Pending approvals")).first.wait_for()


async def _approval_of(dashboard: httpx.AsyncClient, contact_id: str) -> None:
    """Until the dashboard's API lists the approval a held call on `contact_id` waits for."""
    deadline = asyncio.get_running_loop().time() + 10
    while contact_id not in (await dashboard.get("/api/approvals/actions")).text:
        assert asyncio.get_running_loop().time() < deadline, "the call was not held in 10 s"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("stream", ["open", "late"])
async def test_approving_a_held_call_from_the_ui_resumes_it(
    ui: tuple[Any, Watcher],
    butler_ecosystem: EcosystemHandle,
    dashboard: httpx.AsyncClient,
    stream: str,
) -> None:
    """`late`: the page's event stream connects only after the call is held (a page
    that read its lists just before a change, whose stream was not yet subscribed): the
    stream's first connection must refresh what the page read."""
    page, watcher = ui
    contact = await butler_ecosystem.call("relationship", "contact_add", {"name": "UI Held"})
    contact_id = str(contact["id"])
    subscribe = asyncio.Event()

    async def hold_the_stream(route: Any) -> None:
        await subscribe.wait()
        await route.continue_()

    if stream == "late":
        await page.route("**/api/events", hold_the_stream)
    await _open(page, "/approvals")
    await _pending_listed(page)
    held = asyncio.create_task(
        butler_ecosystem.call("relationship", "contact_delete", {"contact_id": contact_id})
    )
    try:
        if stream == "late":
            await _approval_of(dashboard, contact_id)
            subscribe.set()
        item = page.locator("li.approval", has_text=contact_id)
        listed = asyncio.ensure_future(item.wait_for(timeout=30_000))
        await asyncio.wait([listed, held], return_when=asyncio.FIRST_COMPLETED)
        if held.done():  # the call ended without being held: say how
            listed.cancel()
            pytest.fail(f"the call was never held for approval: {held.result()!r}")
        await listed  # listed live (approval_requested event, or the stream's first connection)
        await page.locator("a .count-badge").wait_for()  # the nav's live badge
        assert "left" in (await item.locator(".countdown").text_content() or "")
        await item.get_by_label(re.compile("^Reason for")).fill(f"tidy up {contact_id}")
        await page.screenshot(path=_shot("approvals_pending"), full_page=True)
        await item.get_by_role("button", name=re.compile("^Approve")).click()
        assert await asyncio.wait_for(held, 15) == {"contact_id": contact_id, "deleted": True}
        await item.wait_for(state="detached")
        history = page.get_by_role("table", name="Decided approvals")
        await history.locator("tr", has_text=f"tidy up {contact_id}").wait_for()
    finally:
        if not held.done():
            held.cancel()
    assert watcher.problems == []


async def test_state_create_edit_and_delete_from_the_ui(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle, dashboard: httpx.AsyncClient
) -> None:
    page, watcher = ui
    key = f"ui/{uuid.uuid4().hex[:6]}/naïve"
    await _open(page, "/butlers/general/state")
    await page.get_by_role("button", name="New entry").click()
    form = page.get_by_role("form", name="New state entry")
    await form.get_by_label("Key").fill(key)
    await form.get_by_label("Value (JSON)").fill('{"kept": null, "list": [1, "ü"]}')
    await form.get_by_role("button", name="Save").click()
    row = page.locator(f"tr[data-key='{key}']")
    await row.wait_for()
    value = {"kept": None, "list": [1, "ü"]}
    assert await butler_ecosystem.call("general", "state_get", {"key": key}) == value
    await row.get_by_role("button", name=f"Edit {key}").click()
    edit = page.get_by_role("form", name=f"Edit {key}")
    await edit.get_by_label("Value (JSON)").fill("{broken")
    await edit.get_by_role("button", name="Save").click()
    await edit.get_by_role("alert").wait_for()  # refused before anything is sent
    assert await butler_ecosystem.call("general", "state_get", {"key": key}) == value
    await edit.get_by_label("Value (JSON)").fill("2")
    await edit.get_by_role("button", name="Save").click()
    await row.locator("pre", has_text="2").wait_for()
    assert await butler_ecosystem.call("general", "state_get", {"key": key}) == 2
    await row.get_by_role("button", name=f"Delete {key}").click()  # the confirm is accepted
    await row.wait_for(state="detached")
    missing = await dashboard.get(f"/api/butlers/general/state/{key}")
    assert missing.status_code == 404
    assert watcher.problems == []


async def test_memory_search_history_and_retract_from_the_ui(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    subject = f"bike-{uuid.uuid4().hex[:6]}"
    fact = {"subject": subject, "predicate": "locked_at"}
    await butler_ecosystem.call("health", "memory_store_fact", fact | {"content": "the station"})
    new = await butler_ecosystem.call("health", "memory_store_fact", fact | {"content": "home"})
    claim = {"subject": subject, "predicate": "value", "content": "9000 CHF"}
    await butler_ecosystem.call("health", "memory_store_fact", claim | {"source": "untrusted"})
    await _open(page, "/memory")
    await page.get_by_label("Search facts").fill(subject)
    facts = page.get_by_role("table", name="Facts")
    await facts.get_by_role("button", name=f"{subject} · value · 9000 CHF").wait_for()
    claim_row = facts.locator("tr", has_text="9000 CHF")
    assert "untrusted" in (await claim_row.text_content() or "")
    await facts.get_by_role("button", name=f"{subject} · locked_at · home").click()
    detail = page.get_by_role("complementary", name="Fact detail")
    history = detail.get_by_role("list", name="Fact history")
    await history.locator("li", has_text="the station").wait_for()
    assert "superseded" in (await history.locator("li").nth(1).text_content() or "")
    await detail.get_by_role("button", name=f"Retract {subject} · locked_at · home").click()
    await detail.get_by_role("button", name=f"Restore {subject} · locked_at · home").wait_for()
    chain = await butler_ecosystem.call("health", "memory_history", {"id": new["id"]})
    assert [f["validity"] for f in chain] == ["retracted", "superseded"]
    assert watcher.problems == []


async def test_a_secret_is_set_and_deleted_from_the_ui_without_its_value_shown(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    key, value = f"UI_{uuid.uuid4().hex[:6].upper()}_TOKEN", f"ui-{uuid.uuid4().hex}"
    await _open(page, "/secrets")
    await page.get_by_label("Store").select_option("general")
    form = page.get_by_role("form", name="Set a secret")
    await form.get_by_label("Key").fill(key)
    await form.get_by_label("Value (write-only; empty keeps it)").fill(value)
    await form.get_by_role("button", name="Save").click()
    row = page.locator(f"tr[data-key='{key}']")
    await row.wait_for()
    cells = await row.locator("td").all_text_contents()
    assert cells[3] == "store" and cells[4].endswith("set") and "not" not in cells[4], cells
    assert value not in await page.content()
    pool = await butler_ecosystem.pool("general")
    assert await pool.fetchval("SELECT value IS NOT NULL FROM secrets WHERE key = $1", key)
    await row.get_by_role("button", name=f"Delete {key}").click()  # the confirm is accepted
    await row.wait_for(state="detached")
    assert await pool.fetchval("SELECT count(*) FROM secrets WHERE key = $1", key) == 0
    assert watcher.problems == []


async def test_schedule_create_toggle_and_delete_from_the_ui(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    name = f"ui-{uuid.uuid4().hex[:6]}"
    await _open(page, "/butlers/general/schedules")
    await page.get_by_role("button", name="New schedule").click()
    form = page.get_by_role("form", name="New schedule")
    await form.get_by_label("Name").fill(name)
    await form.get_by_label("Cron").fill("15 7 * * 1")
    await form.get_by_label("Prompt").fill("Weekly review from the UI")
    await form.get_by_role("button", name="Create schedule").click()
    row = page.locator(f"tr[data-schedule='{name}']")
    await row.locator(".badge[data-status='enabled']").wait_for()

    async def over_mcp() -> dict[str, Any] | None:
        listed = await butler_ecosystem.call("general", "schedule_list")
        return next((s for s in listed if s["name"] == name), None)

    created = await over_mcp()
    assert created and created["cron"] == "15 7 * * 1" and created["enabled"] is True
    await row.get_by_role("button", name=f"Disable {name}").click()
    await row.locator(".badge[data-status='disabled']").wait_for()
    assert (await over_mcp() or {}).get("enabled") is False
    await row.get_by_role("button", name=f"Delete {name}").click()
    await row.wait_for(state="detached")
    assert await over_mcp() is None
    assert watcher.problems == []


async def test_a_module_is_switched_off_and_on_from_the_ui(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui

    async def tools() -> set[str]:
        async with butler_ecosystem.client("health") as client:
            return {t.name for t in await client.list_tools()}

    before = await tools()
    await _open(page, "/butlers/health/modules")
    row = page.locator("tr[data-module='health']")
    await row.locator(".badge[data-status='enabled']").wait_for()
    try:
        await row.get_by_role("button", name="Disable module health").click()  # confirmed
        await row.locator(".badge[data-status='disabled']").first.wait_for()
        assert "measurement_log" not in await tools()
    finally:
        await row.get_by_role("button", name="Enable module health").click()
    await row.locator(".badge[data-status='enabled']").wait_for()
    assert await tools() == before
    assert watcher.problems == []


async def test_triage_rule_create_try_and_delete_from_the_ui(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    name = f"ui-{uuid.uuid4().hex[:6]}"
    await _open(page, "/triage")
    form = page.get_by_role("form", name="New triage rule")
    await form.get_by_label("Name").fill(name)
    await form.get_by_label("When").select_option("domain")
    await form.get_by_label("is / contains").fill(f"{name}.example")
    await form.get_by_label("Butler").fill("health")
    await form.get_by_role("button", name="Add rule").click()
    row = page.locator(f"tr[data-rule='{name}']")
    await row.wait_for()
    rules = await butler_ecosystem.call("switchboard", "triage_rules_list")
    assert [(r["action"], r["butler"]) for r in rules if r["name"] == name] == [("route", "health")]
    trial = page.get_by_role("form", name="Try a message")
    await trial.get_by_label("Sender").fill(f"dr@{name}.example")
    await trial.get_by_role("button", name="Try").click()
    result = trial.get_by_label("Dry run result")
    await result.wait_for()
    assert "route → health" in await result.inner_text()
    await row.get_by_role("button", name=f"Delete rule {name}").click()
    await row.wait_for(state="detached")
    assert watcher.problems == []


async def test_calendar_event_created_and_renamed_from_the_ui(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle, request: pytest.FixtureRequest
) -> None:
    if request.config.stash.get(CALDAV_SERVER, None) is None:
        pytest.skip(CALDAV_UNREACHABLE)
    page, watcher = ui
    title = f"UI event {uuid.uuid4().hex[:6]}"
    await _open(page, "/calendar")
    await page.get_by_role("button", name="New event").click()
    form = page.get_by_role("form", name="New event")
    await form.get_by_label("Title").fill(title)
    await form.get_by_role("button", name="Save").click()
    entry = page.get_by_role("button", name=re.compile(re.escape(title)))
    await entry.wait_for()

    async def on_the_calendar() -> list[str]:
        now = datetime.now(UTC)
        listed = await butler_ecosystem.call(
            "general",
            "calendar_list_events",
            {
                "start": (now - timedelta(days=8)).isoformat(),
                "end": (now + timedelta(days=8)).isoformat(),
            },
        )
        return [e["summary"] for e in listed["events"]]

    assert title in await on_the_calendar()
    await entry.click()
    edit = page.get_by_role("form", name="Edit event")
    await edit.get_by_label("Title").fill(title + " renamed")
    await edit.get_by_role("button", name="Save").click()
    await page.get_by_role("button", name=re.compile(re.escape(title + " renamed"))).wait_for()
    mine = [summary for summary in await on_the_calendar() if summary.startswith(title)]
    assert mine == [title + " renamed"], "renamed in place, not a second event"
    assert watcher.problems == []


async def test_one_occurrence_of_a_series_is_renamed_from_the_ui(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle, request: pytest.FixtureRequest
) -> None:
    if request.config.stash.get(CALDAV_SERVER, None) is None:
        pytest.skip(CALDAV_UNREACHABLE)
    page, watcher = ui
    title = f"Series {uuid.uuid4().hex[:6]}"
    monday = datetime.now(UTC).date()
    monday -= timedelta(days=monday.weekday())
    first = datetime.combine(monday, time(12), tzinfo=UTC)
    made = await butler_ecosystem.call(
        "general",
        "calendar_create_event",
        {
            "summary": title,
            "start": first.isoformat(),
            "end": (first + timedelta(hours=1)).isoformat(),
            "rrule": "FREQ=DAILY;COUNT=3",
        },
    )
    await _open(page, "/calendar")
    entries = page.get_by_role("button", name=re.compile(re.escape(title)))
    await entries.nth(2).wait_for()
    await entries.nth(1).click()
    edit = page.get_by_role("form", name="Edit event")
    assert await edit.get_by_label("Only this occurrence").is_checked()
    await edit.get_by_label("Title").fill(title + " moved")
    await edit.get_by_role("button", name="Save").click()
    await page.get_by_role("button", name=re.compile(re.escape(title + " moved"))).wait_for()
    listed = await butler_ecosystem.call(
        "general",
        "calendar_list_events",
        {"start": first.isoformat(), "end": (first + timedelta(days=3)).isoformat()},
    )
    mine = [e["summary"] for e in listed["events"] if e["event_id"] == made["event_id"]]
    assert mine == [title, title + " moved", title], "the series kept, one occurrence renamed"
    assert watcher.problems == []


async def test_with_a_token_the_ui_signs_in_and_its_writes_carry_the_cookie(
    browser: Any, butler_ecosystem: EcosystemHandle
) -> None:
    token = "ui-" + uuid.uuid4().hex  # a dashboard of its own, in token mode
    async with extra_dashboard(butler_ecosystem, token=token) as (url, _):
        base = url.rstrip("/")
        context = await browser.new_context(base_url=base)
        page = await context.new_page()
        page.set_default_timeout(WAIT_MS)
        watcher = Watcher(base)
        watcher.attach(page)
        try:
            await page.goto("/butlers/general/state")
            await page.wait_for_url(re.compile(r"/login\?next="))  # the SPA sent us to sign in
            await page.get_by_label("Dashboard token").fill("not-the-token-at-all")
            await page.get_by_role("button", name="Sign in").click()
            await page.get_by_role("alert").wait_for()
            await page.get_by_label("Dashboard token").fill(token)
            await page.get_by_role("button", name="Sign in").click()
            await page.wait_for_url(re.compile(r"/butlers/general/state$"))
            cookie = next(c for c in await context.cookies() if "session" in c["name"])
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            assert token not in cookie["value"]
            key = f"ui-token/{uuid.uuid4().hex[:6]}"
            await page.get_by_role("button", name="New entry").click()
            form = page.get_by_role("form", name="New state entry")
            await form.get_by_label("Key").fill(key)
            await form.get_by_label("Value (JSON)").fill("true")
            await form.get_by_role("button", name="Save").click()
            await page.locator(f"tr[data-key='{key}']").wait_for()
            assert await butler_ecosystem.call("general", "state_get", {"key": key}) is True
            # Signing out ends the session on the server: the old cookie opens nothing.
            await page.get_by_role("button", name="Sign out").click()
            await page.wait_for_url(re.compile(r"/login$"))
            copied = {cookie["name"]: cookie["value"]}
            async with httpx.AsyncClient(base_url=url, cookies=copied) as replay:
                assert (await replay.get("/api/butlers")).status_code == 401
        finally:
            await context.close()
    # The one 401 is the login page refusing the wrong token: the UI itself asked
    # /api/auth/status first and made no call that was bound to be refused.
    refused = [p for p in watcher.problems if "401" in p]
    assert all("/login" in p or "status of 401" in p for p in refused), refused
    assert [p for p in watcher.problems if p not in refused] == []


async def test_a_running_session_is_cancelled_from_its_page(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    page, watcher = ui
    marker = f"ui-cancel {uuid.uuid4().hex[:6]}"
    llm_script.route("general", step("too late", delay=60))
    trigger = asyncio.create_task(
        butler_ecosystem.call("general", "trigger", {"prompt": f"slow {marker}"})
    )
    try:
        await _open(page, "/sessions")
        await page.get_by_label("Butler").select_option("general")
        row = page.locator("tr[data-session]", has_text=marker)
        await row.wait_for()
        await row.get_by_role("link").click()
        button = page.get_by_role("button", name="Cancel session")
        await button.wait_for()
        # Cancelled while it waits for the model (its step held 60 s), not before: a session
        # starts (and shows) before its model call, after its memory's recall.
        await wait_until(
            lambda: any(marker in json.dumps(r) for r in llm_script.requests_for("general")),
            timeout=30,
            message="the session's model call",
        )
        await button.click()
        await page.locator("dt:text-is('Status') + dd", has_text="cancelled").wait_for()
        await button.wait_for(state="detached")
        result = await asyncio.wait_for(trigger, 15)
    finally:
        if not trigger.done():
            trigger.cancel()
    assert result["success"] is False and result["error"].startswith("cancelled by ")
    await page.screenshot(path=_shot("session_cancelled"), full_page=True)
    assert watcher.problems == []


async def test_a_pending_reminder_is_cancelled_from_the_reminders_page(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    text = f"ui reminder {uuid.uuid4().hex[:6]}"
    made = await butler_ecosystem.call("health", "remind", {"text": text, "after": "3h"})
    await _open(page, "/reminders")
    row = page.locator("tr", has_text=text)
    await row.wait_for()
    await row.get_by_role("button", name=f"Cancel reminder {text}").click()
    await row.get_by_text("cancelled").wait_for()
    stored = await butler_ecosystem.call("health", "reminder_get", {"reminder_id": made["id"]})
    assert stored["status"] == "cancelled"
    await page.screenshot(path=_shot("reminder_cancelled"), full_page=True)
    assert watcher.problems == []


async def test_share_a_fact_and_consolidate_now_from_the_ui(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    subject = f"kayak-{uuid.uuid4().hex[:6]}"
    fact = {"subject": subject, "predicate": "stored_at", "content": "the boathouse"}
    stored = await butler_ecosystem.call("health", "memory_store_fact", fact)
    await _open(page, "/memory")
    await page.get_by_label("Search facts").fill(subject)
    facts = page.get_by_role("table", name="Facts")
    await facts.get_by_role("button", name=f"{subject} · stored_at · the boathouse").click()
    detail = page.get_by_role("complementary", name="Fact detail")
    # The box shows what the butler recorded: checked once the share is done.
    await detail.get_by_label("Share with general").click()
    await detail.locator("input[aria-label='Share with general']:checked").wait_for()
    for _ in range(100):
        hits = await butler_ecosystem.call("general", "memory_search", {"query": subject})
        if any(h.get("shared_from") == "health" for h in hits):
            break
        await page.wait_for_timeout(100)
    assert [h["shared_from"] for h in hits if subject in h["text"]] == ["health"]
    assert stored["id"] not in [h["id"] for h in hits]  # a copy, not health's own row
    pool = await butler_ecosystem.pool("relationship")
    await pool.execute("UPDATE memory_episodes SET consolidated = TRUE")
    await page.get_by_label("Butler to consolidate").select_option("relationship")
    await page.get_by_role("button", name="Consolidate now").click()
    await page.get_by_role("status").filter(has_text="relationship: completed").wait_for()
    runs = page.get_by_role("table", name="Consolidation runs")
    await runs.locator("tr", has_text="owner").first.wait_for()
    assert watcher.problems == []
