// Dark mode: inside TensorBoard, its body's "dark-mode" class (TensorBoard's own
// setting, which itself defaults to the system's); standalone, prefers-color-scheme.

import { useEffect, useState } from "react";
import { tbWindow } from "./host";

function tbDark(): boolean | null {
  const p = tbWindow();
  try {
    const body = p?.document?.body;
    return body ? body.classList.contains("dark-mode") : null;
  } catch {
    return null;
  }
}

function systemDark(): boolean {
  try {
    return window.matchMedia("(prefers-color-scheme: dark)").matches;
  } catch {
    return false;
  }
}

export function isDark(): boolean {
  const tb = tbDark();
  return tb ?? systemDark();
}

export function useDarkMode(): boolean {
  const [dark, setDark] = useState(isDark);
  useEffect(() => {
    const update = () => setDark(isDark());
    let mq: MediaQueryList | null = null;
    try {
      mq = window.matchMedia("(prefers-color-scheme: dark)");
      mq.addEventListener("change", update);
    } catch {
      mq = null;
    }
    let obs: MutationObserver | null = null;
    try {
      const body = tbWindow()?.document?.body;
      if (body) {
        obs = new MutationObserver(update);
        obs.observe(body, { attributes: true, attributeFilter: ["class"] });
      }
    } catch {
      obs = null;
    }
    return () => {
      mq?.removeEventListener("change", update);
      obs?.disconnect();
    };
  }, []);
  useEffect(() => {
    document.documentElement.dataset.theme = dark ? "dark" : "light";
    document.documentElement.style.colorScheme = dark ? "dark" : "light";
  }, [dark]);
  return dark;
}
