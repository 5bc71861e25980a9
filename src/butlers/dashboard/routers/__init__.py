"""The dashboard's core routers, in the order they are mounted (before any module's)."""

from __future__ import annotations

from fastapi import APIRouter


def core_routers() -> list[APIRouter]:
    from butlers.dashboard.routers import (
        approval_rules,
        approvals,
        audit,
        butlers,
        calendar,
        conversations,
        costs,
        events,
        issues,
        memory,
        metrics,
        notifications,
        oauth,
        overview,
        quarantine,
        reminders,
        schedules,
        search,
        secrets,
        sessions,
        state,
        tables,
        timeline,
        tools,
        traces,
        triage,
    )

    return [
        butlers.router,
        overview.router,
        tools.router,
        sessions.router,
        traces.router,
        timeline.router,
        notifications.router,
        state.router,
        oauth.router,
        schedules.router,
        reminders.router,
        costs.router,
        metrics.router,
        approvals.router,
        approval_rules.router,
        memory.router,
        quarantine.router,
        conversations.router,
        search.router,
        audit.router,
        issues.router,
        secrets.router,
        calendar.router,
        tables.router,
        events.router,
        triage.router,
    ]
