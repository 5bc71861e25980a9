"""What people expect of the web UI beyond its data, in a real browser: one activity feed,
tool descriptions as Markdown, filters in the URL, charts, a dark mode that follows the
system, and keyboard navigation. The browser and sign-in come from `test_ui`."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2 as httpx

from butlers.testing.script_server import Script, step

from ..harness.ecosystem import EcosystemHandle
from .conftest import seed_sessions
from .test_ui import Watcher, _open, _shot, browser, ui

__all__ = ["browser", "ui"]  # the fixtures, used here by name


def _query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query, keep_blank_values=True)


async def test_the_overview_shows_each_event_once_in_one_activity_feed(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle, llm_script: Script
) -> None:
    page, watcher = ui
    marker = f"feed {uuid.uuid4().hex[:6]}"
    llm_script.route("general", step(f"done {marker}"))
    await _open(page, "/")
    await page.get_by_role("status", name="Live updates: live").wait_for()
    result = await butler_ecosystem.call("general", "trigger", {"prompt": marker})
    session = str(result["session_id"])
    feed = page.get_by_role("list", name="Activity")
    # The end arrives live (an event), then as the timeline's row: shown once either way.
    await feed.locator(f"li[data-kind='session_end'][data-ref='{session}']").wait_for()
    await feed.locator(
        f"li[data-kind='session_start'][data-ref='{session}'][data-source='recorded']"
    ).wait_for()
    await page.wait_for_load_state("networkidle")
    kinds = await feed.locator(f"li[data-ref='{session}']").evaluate_all(
        "items => items.map(li => li.dataset.kind)"
    )
    assert sorted(kinds) == ["session_end", "session_start"], kinds
    assert await page.locator("ol.feed").count() == 1
    assert await page.get_by_role("heading", name="Recently").count() == 0
    await page.screenshot(path=_shot("overview_activity"), full_page=True)
    assert watcher.problems == []


async def test_tool_descriptions_render_as_markdown(
    ui: tuple[Any, Watcher], dashboard: httpx.AsyncClient
) -> None:
    page, watcher = ui
    tools = (await dashboard.get("/api/butlers/general/mcp/tools")).json()["data"]
    with_code = [t for t in tools if re.search(r"`[^`]+`", t["description"] or "")]
    assert with_code, "no tool of general documents a name in backticks"
    tool = with_code[0]
    await _open(page, "/butlers/general/tools")
    description = page.locator(f"li[data-tool='{tool['name']}'] .description")
    await description.wait_for()
    spans = re.findall(r"`([^`]+)`", tool["description"])
    assert await description.locator("code").first.text_content() == spans[0]
    assert "`" not in (await description.inner_text())
    # Nothing of a description is markup the page runs: no script, no handler attributes.
    assert await page.locator(".description script, .description [onerror]").count() == 0
    assert watcher.problems == []


async def test_list_filters_live_in_the_url_and_the_back_button_undoes_them(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    await seed_sessions(butler_ecosystem, "health", [{"created_at": datetime.now(UTC)}])
    await _open(page, "/sessions")
    await page.get_by_label("Butler").select_option("health")
    await page.wait_for_url(re.compile(r"butler=health"))
    await page.get_by_label("Status").select_option("completed")
    await page.wait_for_url(re.compile(r"status=completed"))
    await page.get_by_label("Time range").select_option("7d")
    await page.wait_for_url(re.compile(r"range=7d"))
    assert _query(page) == {"butler": ["health"], "status": ["completed"], "range": ["7d"]}
    rows = page.locator("tr[data-session]")
    await rows.first.wait_for()
    # A shared link opens the same view.
    shared = page.url
    await page.goto("/")
    await page.goto(shared)
    await page.locator("tr[data-session]").first.wait_for()
    assert await page.get_by_label("Butler").input_value() == "health"
    assert await page.get_by_label("Status").input_value() == "completed"
    assert await page.get_by_label("Time range").input_value() == "7d"
    # Back undoes one change at a time.
    await page.go_back()
    await page.get_by_role("heading", name="Overview").wait_for()
    await page.go_back()
    await page.get_by_role("heading", name="Sessions").wait_for()
    await page.go_back()
    await page.wait_for_url(re.compile(r"^[^?]*\?butler=health&status=completed$"))
    assert await page.get_by_label("Time range").input_value() == ""
    assert await page.get_by_label("Status").input_value() == "completed"
    await page.go_back()
    await page.wait_for_url(re.compile(r"\?butler=health$"))
    assert await page.get_by_label("Status").input_value() == ""
    # The other list pages read their filters from the URL too.
    await _open(page, "/audit?status=ok&range=24h")
    assert await page.get_by_label("Outcome").input_value() == "ok"
    assert await page.get_by_label("Time range").input_value() == "24h"
    await _open(page, "/memory?validity=superseded&q=bike")
    assert await page.get_by_label("Search facts").input_value() == "bike"
    assert await page.get_by_label("Validity").input_value() == "superseded"
    await _open(page, "/costs?period=30d")
    await page.get_by_role("button", name="30 days", pressed=True).wait_for()
    await _open(page, "/notifications?status=failed")
    assert await page.get_by_label("Status").input_value() == "failed"
    assert watcher.problems == []


async def test_charts_show_sessions_errors_cost_and_duration_and_say_what_is_unpriced(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    mystery = f"mystery-ui-{uuid.uuid4().hex[:6]}"
    now = datetime.now(UTC)
    await seed_sessions(
        butler_ecosystem,
        "general",
        [
            {"created_at": now - timedelta(minutes=20 + i), "model": mystery, "duration_ms": 700}
            for i in range(3)
        ],
    )
    await _open(page, "/metrics?range=24h&by=model")
    for name in ("sessions", "errors", "cost", "duration"):
        await page.locator(f"figure[data-chart='{name}']").wait_for()
    sessions = page.locator("figure[data-chart='sessions']")
    await sessions.locator(".recharts-bar-rectangle").first.wait_for()
    await sessions.locator(".recharts-legend-item", has_text=mystery).wait_for()
    counted = await sessions.locator(f"td[data-series='{mystery}']").all_text_contents()
    assert sum(int(c) for c in counted if c.isdigit()) == 3, counted
    duration = page.locator("figure[data-chart='duration']")
    await duration.locator(".recharts-line-dot").first.wait_for()
    note = page.locator(f"figure[data-chart='cost'] [data-unpriced='{mystery}']")
    assert re.search(r"no price known.*3 sessions unpriced", await note.inner_text()), (
        await note.inner_text()
    )
    await page.screenshot(path=_shot("metrics_by_model"), full_page=True)
    await page.get_by_role("button", name="per butler").click()
    await page.wait_for_url(lambda url: "by=" not in url)  # the default is left out
    await sessions.locator(".recharts-legend-item", has_text="general").wait_for()
    await _open(page, "/costs?period=24h")
    unpriced = page.locator(f"[data-unpriced='{mystery}']")
    assert "no price known" in await unpriced.inner_text()
    await page.screenshot(path=_shot("costs_charts"), full_page=True)
    assert watcher.problems == []


async def _theme(page: Any) -> tuple[str, str]:
    return await page.evaluate(
        """() => [document.documentElement.dataset.theme,
                  getComputedStyle(document.documentElement).backgroundColor]"""
    )


async def _wait_theme(page: Any, theme: str, timeout: float = 10.0) -> None:
    """Until the page shows `theme` (a choice or the system's change applies on React's
    next render, not within the call that made it). Polled from here: the page's CSP
    forbids the `eval` that Playwright's in-page `wait_for_function` polling needs."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (shown := (await _theme(page))[0]) != theme:
        assert asyncio.get_running_loop().time() < deadline, f"theme {shown!r}, not {theme!r}"
        await asyncio.sleep(0.05)


async def test_dark_mode_follows_the_system_and_a_choice_is_kept(
    ui: tuple[Any, Watcher],
) -> None:
    page, watcher = ui
    await page.emulate_media(color_scheme="dark")
    await _open(page, "/")
    await _wait_theme(page, "dark")
    theme, background = await _theme(page)
    assert theme == "dark" and background == "rgb(17, 22, 29)", (theme, background)
    await page.screenshot(path=_shot("overview_dark"), full_page=True)
    await page.emulate_media(color_scheme="light")  # the system changes: the page follows
    await _wait_theme(page, "light")
    await page.get_by_label("Theme").select_option("dark")
    await _wait_theme(page, "dark")
    await page.reload()
    await page.get_by_role("heading", level=1).first.wait_for()
    await _wait_theme(page, "dark")  # kept, though the system says light
    assert (await _theme(page))[0] == "dark"
    assert await page.get_by_label("Theme").input_value() == "dark"
    await page.get_by_label("Theme").select_option("system")
    await _wait_theme(page, "light")
    assert watcher.problems == [], watcher.problems


async def _focused(page: Any) -> dict[str, Any]:
    return dict(
        await page.evaluate(
            """() => { const el = document.activeElement;
                const row = el && el.closest('tr');
                return { tag: el ? el.tagName : null, text: el ? el.textContent : null,
                         row: row ? row.dataset.session || null : null,
                         current: row ? row.classList.contains('kbd-current') : false,
                         outline: el ? getComputedStyle(el).outlineStyle : null }; }"""
        )
    )


async def test_the_main_flows_work_from_the_keyboard(
    ui: tuple[Any, Watcher], butler_ecosystem: EcosystemHandle
) -> None:
    page, watcher = ui
    now = datetime.now(UTC)
    await seed_sessions(
        butler_ecosystem,
        "general",
        [{"created_at": now - timedelta(seconds=i), "prompt": f"kbd {i}"} for i in range(2)],
    )
    await _open(page, "/")
    await page.keyboard.press("Tab")  # the first stop skips the navigation
    assert (await _focused(page))["text"] == "Skip to content"
    await page.keyboard.press("?")
    help_ = page.get_by_role("dialog", name="Keyboard shortcuts")
    await help_.wait_for()
    assert "Sessions" in await help_.inner_text()
    await page.keyboard.press("Escape")
    await help_.wait_for(state="detached")
    await page.keyboard.press("g")
    await page.keyboard.press("s")
    await page.wait_for_url(re.compile(r"/sessions$"))
    await page.locator("tr[data-session]").nth(1).wait_for()
    await page.keyboard.press("j")
    first = await _focused(page)
    assert first["tag"] == "A" and first["row"] and first["current"], first
    assert first["outline"] != "none", first  # the focus is visible
    await page.keyboard.press("j")
    second = await _focused(page)
    assert second["row"] and second["row"] != first["row"], second
    await page.keyboard.press("k")
    assert (await _focused(page))["row"] == first["row"]
    await page.keyboard.press("Enter")
    await page.wait_for_url(re.compile(rf"/sessions/{first['row']}$"))
    await page.get_by_role("heading", name=re.compile("^Session")).wait_for()
    await page.keyboard.press("g")
    await page.keyboard.press("x")
    await page.wait_for_url(re.compile(r"/metrics$"))
    await page.get_by_role("heading", name="Metrics").wait_for()
    await page.keyboard.press("g")
    await page.keyboard.press("s")
    await page.wait_for_url(re.compile(r"/sessions$"))
    await page.get_by_role("heading", name="Sessions").wait_for()
    await page.keyboard.press("/")
    focused = await _focused(page)
    assert focused["tag"] in ("INPUT", "SELECT"), focused
    # Keys typed into a field stay the field's.
    await page.get_by_label("Trigger source").focus()
    await page.keyboard.type("gs")
    assert await page.get_by_label("Trigger source").input_value() == "gs"
    assert page.url.endswith("/sessions?trigger=gs")
    assert watcher.problems == []
