// Light or dark: the system's choice (prefers-color-scheme), unless the user picked one,
// which is kept in localStorage. The resolved theme is `data-theme` on <html>.
import { useCallback, useEffect, useState } from "react";

export const THEME_CHOICES = ["system", "light", "dark"] as const;
export type ThemeChoice = (typeof THEME_CHOICES)[number];
const STORAGE_KEY = "butlers.theme";
const DARK_QUERY = "(prefers-color-scheme: dark)";

export function storedTheme(): ThemeChoice {
  try {
    const raw = window.localStorage.getItem(STORAGE_KEY);
    return (THEME_CHOICES as readonly string[]).includes(raw ?? "") ? (raw as ThemeChoice) : "system";
  } catch {
    return "system"; // storage refused (private mode): follow the system
  }
}

function systemIsDark(): boolean {
  return typeof window.matchMedia === "function" && window.matchMedia(DARK_QUERY).matches;
}

export function resolveTheme(choice: ThemeChoice): "light" | "dark" {
  if (choice === "system") return systemIsDark() ? "dark" : "light";
  return choice;
}

export function applyTheme(choice: ThemeChoice): void {
  document.documentElement.dataset.theme = resolveTheme(choice);
  document.documentElement.dataset.themeChoice = choice;
}

/** The user's choice and its setter; while it is "system", a change of the system's
 * preference applies at once. */
export function useTheme() {
  const [choice, setChoice] = useState<ThemeChoice>(storedTheme);
  useEffect(() => {
    applyTheme(choice);
    if (choice !== "system" || typeof window.matchMedia !== "function") return;
    const media = window.matchMedia(DARK_QUERY);
    const follow = () => applyTheme("system");
    media.addEventListener("change", follow);
    return () => media.removeEventListener("change", follow);
  }, [choice]);
  const choose = useCallback((next: ThemeChoice) => {
    try {
      if (next === "system") window.localStorage.removeItem(STORAGE_KEY);
      else window.localStorage.setItem(STORAGE_KEY, next);
    } catch {
      // storage refused: the choice holds for this page only
    }
    setChoice(next);
  }, []);
  return [choice, choose] as const;
}
