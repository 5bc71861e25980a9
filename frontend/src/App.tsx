import { lazy, Suspense, useCallback, useEffect, useState } from "react";
import { NavLink, Route, Routes } from "react-router-dom";

import { loginUrl } from "./api/client";
import { ErrorBox } from "./components/DataState";
import { KeyboardHelp, ThemeSwitch } from "./components/KeyboardHelp";
import { useApprovalActions, useAuthStatus } from "./hooks/useApi";
import { useKeyboard } from "./hooks/useKeyboard";
import { LiveEventsProvider, useLive } from "./hooks/useLiveEvents";
import { useTheme } from "./lib/theme";
import { ApprovalsPage } from "./pages/Approvals";
import { AuditPage } from "./pages/Audit";
import { ConversationsPage } from "./pages/Conversations";
import { IssuesPage } from "./pages/Issues";
import { MemoryPage } from "./pages/Memory";
import { NotificationsPage } from "./pages/Notifications";
import { TriagePage } from "./pages/Triage";
import { RemindersPage } from "./pages/Reminders";
import { OverviewPage } from "./pages/Overview";
import { CalendarPage } from "./pages/Calendar";
import { SearchPage } from "./pages/Search";
import { SecretsPage } from "./pages/Secrets";
import { SessionPage } from "./pages/Session";
import { SessionsPage } from "./pages/Sessions";
import { TracePage } from "./pages/Trace";
import { TracesPage } from "./pages/Traces";

// The pages with charts load the charting library when first opened, a butler's page
// the Markdown renderer of its tools' descriptions.
const ButlerPage = lazy(() => import("./pages/Butler").then((m) => ({ default: m.ButlerPage })));
const CostsPage = lazy(() => import("./pages/Costs").then((m) => ({ default: m.CostsPage })));
const MetricsPage = lazy(() => import("./pages/Metrics").then((m) => ({ default: m.MetricsPage })));

const LINKS: [string, string][] = [
  ["/", "Overview"],
  ["/conversations", "Conversations"],
  ["/sessions", "Sessions"],
  ["/traces", "Traces"],
  ["/approvals", "Approvals"],
  ["/memory", "Memory"],
  ["/calendar", "Calendar"],
  ["/metrics", "Metrics"],
  ["/costs", "Costs"],
  ["/issues", "Issues"],
  ["/notifications", "Notifications"],
  ["/triage", "Triage"],
  ["/secrets", "Secrets"],
  ["/reminders", "Reminders"],
  ["/audit", "Audit log"],
  ["/search", "Search"],
];

function PendingBadge() {
  const pending = useApprovalActions({ limit: 1 });
  const count = pending.data?.meta.total ?? 0;
  if (!count) return null;
  return (
    <span className="count-badge" aria-label={`${count} pending approvals`}>
      {count}
    </span>
  );
}

function Connection() {
  const { connection } = useLive();
  const text = {
    connecting: "connecting…",
    live: "live",
    reconnecting: "reconnecting…",
    unsupported: "no live updates",
  }[connection];
  return (
    <span className={`connection conn-${connection}`} role="status" aria-label={`Live updates: ${text}`}>
      <span aria-hidden="true">{connection === "live" ? "● " : "○ "}</span>
      {text}
    </span>
  );
}

export function App() {
  const auth = useAuthStatus();
  const [theme, setTheme] = useTheme();
  const [help, setHelp] = useState(false);
  const toggleHelp = useCallback(() => setHelp((h) => !h), []);
  const closeHelp = useCallback(() => setHelp(false), []);
  useKeyboard({ toggleHelp, closeHelp });
  const needsLogin = auth.data && auth.data.data.token_required && !auth.data.data.authenticated;
  useEffect(() => {
    if (needsLogin) window.location.assign(loginUrl());
  }, [needsLogin]);
  if (needsLogin) return <p role="status">Signing in…</p>;
  if (auth.isLoading) return <p role="status">Loading…</p>;
  return (
    <LiveEventsProvider>
    <div className="app">
      <a
        className="skip-link"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          document.getElementById("main")?.focus();
        }}
      >
        Skip to content
      </a>
      <header className="top">
        <span className="brand">Butlers</span>
        <nav aria-label="Main">
          <ul>
            {LINKS.map(([to, label]) => (
              <li key={to}>
                <NavLink to={to} end={to === "/"}>
                  {label}
                  {to === "/approvals" ? <PendingBadge /> : null}
                </NavLink>
              </li>
            ))}
          </ul>
        </nav>
        <Connection />
        <ThemeSwitch choice={theme} onChange={setTheme} />
        <button type="button" className="help-button" onClick={toggleHelp} aria-label="Keyboard shortcuts" title="Keyboard shortcuts (?)">
          ?
        </button>
        {auth.data?.data.token_required && auth.data.data.authenticated ? (
          <SignOut who={auth.data.data.actor} />
        ) : null}
      </header>
      <main id="main" tabIndex={-1}>
        {auth.error ? <ErrorBox error={auth.error} /> : null}
        <Suspense fallback={<p role="status">Loading…</p>}>
        <Routes>
          <Route path="/" element={<OverviewPage />} />
          <Route path="/butlers/:name" element={<ButlerPage />} />
          <Route path="/butlers/:name/:tab" element={<ButlerPage />} />
          <Route path="/butlers/:name/sessions/:id" element={<SessionPage />} />
          <Route path="/sessions" element={<SessionsPage />} />
          <Route path="/conversations" element={<ConversationsPage />} />
          <Route path="/traces" element={<TracesPage />} />
          <Route path="/traces/:id" element={<TracePage />} />
          <Route path="/approvals" element={<ApprovalsPage />} />
          <Route path="/memory" element={<MemoryPage />} />
          <Route path="/calendar" element={<CalendarPage />} />
          <Route path="/metrics" element={<MetricsPage />} />
          <Route path="/costs" element={<CostsPage />} />
          <Route path="/issues" element={<IssuesPage />} />
          <Route path="/notifications" element={<NotificationsPage />} />
          <Route path="/triage" element={<TriagePage />} />
          <Route path="/secrets" element={<SecretsPage />} />
          <Route path="/reminders" element={<RemindersPage />} />
          <Route path="/audit" element={<AuditPage />} />
          <Route path="/search" element={<SearchPage />} />
          <Route path="*" element={<NotFound />} />
        </Routes>
        </Suspense>
      </main>
      {help ? <KeyboardHelp onClose={closeHelp} /> : null}
    </div>
    </LiveEventsProvider>
  );
}

/** Signing out ends the session on the server too (its cookie stops working). */
function SignOut({ who }: { who: string | null | undefined }) {
  return (
    <form className="sign-out" method="post" action="/logout">
      {who ? <span className="who">{who}</span> : null}
      <button type="submit">Sign out</button>
    </form>
  );
}

function NotFound() {
  return (
    <section>
      <h1>Page not found</h1>
      <p>
        There is no page here. <NavLink to="/">Back to the overview</NavLink>.
      </p>
    </section>
  );
}
