// The dashboard's keyboard shortcuts: `g` then a letter opens a page, `j`/`k` move along
// the page's list and Enter opens the selected item, `/` goes to the page's filter, `?`
// shows them all. Keys typed into a field are the field's.
import { useEffect, useRef } from "react";
import { useNavigate } from "react-router-dom";

/** `g` + key → page. The help overlay lists these. */
export const PAGE_KEYS: [string, string, string][] = [
  ["o", "/", "Overview"],
  ["s", "/sessions", "Sessions"],
  ["t", "/traces", "Traces"],
  ["a", "/approvals", "Approvals"],
  ["m", "/memory", "Memory"],
  ["d", "/calendar", "Calendar"],
  ["x", "/metrics", "Metrics"],
  ["c", "/costs", "Costs"],
  ["i", "/issues", "Issues"],
  ["n", "/notifications", "Notifications"],
  ["y", "/triage", "Triage"],
  ["e", "/secrets", "Secrets"],
  ["r", "/reminders", "Reminders"],
  ["l", "/audit", "Audit log"],
  ["f", "/search", "Search"],
];

export const OTHER_KEYS: [string, string][] = [
  ["j / ↓", "next item of the page's list"],
  ["k / ↑", "previous item"],
  ["Enter", "open the selected item"],
  ["/", "go to the page's search or first filter"],
  ["?", "show or hide this help"],
  ["Esc", "close this help, leave a field"],
];

// A page's main list: its first table's rows, or a list of items.
const ITEMS = "main tbody > tr, main ol.feed > li, main ul.tools > li, main ul.approvals > li, main ul.hits > li";
const CURRENT = "kbd-current";
const TYPING = "input, textarea, select, [contenteditable='true']";
const SEQUENCE_MS = 1500;

function items(): HTMLElement[] {
  const all = [...document.querySelectorAll<HTMLElement>(ITEMS)];
  // The items of the first list on the page (the page's main list).
  const first = all[0]?.parentElement;
  return all.filter((el) => el.parentElement === first && el.offsetParent !== null);
}

/** Select the item `step` away from the selected one (the first when none is), focusing
 * its first link or button so that Enter opens it. */
export function moveSelection(step: 1 | -1): HTMLElement | null {
  const list = items();
  if (!list.length) return null;
  const at = list.findIndex((el) => el.classList.contains(CURRENT));
  const next = list[at < 0 ? (step > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, at + step))];
  for (const el of list) el.classList.remove(CURRENT);
  next.classList.add(CURRENT);
  const target = next.querySelector<HTMLElement>("a[href], button:not([disabled])") ?? next;
  if (target === next && !next.hasAttribute("tabindex")) next.tabIndex = -1;
  target.focus();
  target.scrollIntoView({ block: "nearest" });
  return next;
}

function focusFilter(): boolean {
  const field = document.querySelector<HTMLElement>(
    "main input[type='search'], main .toolbar input, main .filters input, main .toolbar select, main .filters select, main input",
  );
  if (!field) return false;
  field.focus();
  return true;
}

export function useKeyboard({ toggleHelp, closeHelp }: { toggleHelp: () => void; closeHelp: () => void }) {
  const navigate = useNavigate();
  const pending = useRef<number | null>(null); // when `g` was pressed
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
      const target = e.target as HTMLElement | null;
      if (e.key === "Escape") {
        closeHelp();
        if (target?.matches(TYPING)) target.blur();
        return;
      }
      if (target?.matches(TYPING) || target?.isContentEditable) return;
      const sequence = pending.current !== null && Date.now() - pending.current < SEQUENCE_MS;
      pending.current = null;
      if (sequence) {
        const page = PAGE_KEYS.find(([key]) => key === e.key.toLowerCase());
        if (page) {
          e.preventDefault();
          closeHelp();
          navigate(page[1]);
          document.querySelector<HTMLElement>("main")?.focus();
        }
        return;
      }
      switch (e.key) {
        case "g":
          pending.current = Date.now();
          return;
        case "?":
          e.preventDefault();
          toggleHelp();
          return;
        case "/":
          if (focusFilter()) e.preventDefault();
          return;
        case "j":
        case "ArrowDown":
        case "k":
        case "ArrowUp": {
          // Arrow keys stay the browser's (scrolling) outside a list.
          const arrow = e.key.startsWith("Arrow");
          if (arrow && !target?.closest(ITEMS)) return;
          if (moveSelection(e.key === "j" || e.key === "ArrowDown" ? 1 : -1)) e.preventDefault();
          return;
        }
        default:
          return;
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [navigate, toggleHelp, closeHelp]);
}
