import { useEffect, useRef } from "react";

import { OTHER_KEYS, PAGE_KEYS } from "../hooks/useKeyboard";
import { THEME_CHOICES, type ThemeChoice } from "../lib/theme";

/** The list of shortcuts, shown by `?` (or its button) and closed by Esc. */
export function KeyboardHelp({ onClose }: { onClose: () => void }) {
  const close = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    const before = document.activeElement as HTMLElement | null;
    close.current?.focus();
    return () => before?.focus?.();
  }, []);
  return (
    <div className="kbd-help" onClick={(e) => e.target === e.currentTarget && onClose()}>
      <div role="dialog" aria-modal="true" aria-labelledby="kbd-help-title">
        <h2 id="kbd-help-title">Keyboard shortcuts</h2>
        <h3>Pages</h3>
        <dl aria-label="Page shortcuts">
          {PAGE_KEYS.map(([key, , label]) => (
            <div key={key} className="kbd-row">
              <dt>
                <kbd>g</kbd> <kbd>{key}</kbd>
              </dt>
              <dd>{label}</dd>
            </div>
          ))}
        </dl>
        <h3>On a page</h3>
        <dl aria-label="Page keys">
          {OTHER_KEYS.map(([key, what]) => (
            <div key={key} className="kbd-row">
              <dt>
                <kbd>{key}</kbd>
              </dt>
              <dd>{what}</dd>
            </div>
          ))}
        </dl>
        <p className="muted small">Tab and Shift+Tab move between controls; the first Tab offers “Skip to content”.</p>
        <button type="button" ref={close} onClick={onClose}>
          Close
        </button>
      </div>
    </div>
  );
}

export function ThemeSwitch({ choice, onChange }: { choice: ThemeChoice; onChange: (c: ThemeChoice) => void }) {
  return (
    <label className="theme-switch">
      <span className="visually-hidden">Theme</span>
      <select aria-label="Theme" value={choice} onChange={(e) => onChange(e.target.value as ThemeChoice)}>
        {THEME_CHOICES.map((c) => (
          <option key={c} value={c}>
            {c === "system" ? "◐ system theme" : c === "light" ? "☀ light" : "☾ dark"}
          </option>
        ))}
      </select>
    </label>
  );
}
