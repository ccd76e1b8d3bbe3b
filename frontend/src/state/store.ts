// The URL-backed app state: one store, React subscribes with useSyncExternalStore.
// A change pushes a history entry (replace for refinements like typing in a filter);
// Back/Forward (popstate) and edited addresses (hashchange) flow back in.

import { useSyncExternalStore } from "react";
import { mirrorToTb, readTbState } from "./host";
import { hrefWithHash, parseState, sameState, serializeState, type AppState } from "./url";

type Listener = () => void;

let current: AppState = { view: "Overview" };
const listeners = new Set<Listener>();
let started = false;

function emit() {
  for (const l of listeners) l();
}

function readLocation(): AppState {
  return parseState(window.location.hash);
}

function write(st: AppState, replace: boolean) {
  const href = hrefWithHash(window.location.href, serializeState(st));
  try {
    if (replace) window.history.replaceState(window.history.state, "", href);
    else window.history.pushState(null, "", href);
  } catch {
    // sandboxed documents may refuse; the in-memory state still works
  }
  mirrorToTb(st);
}

export function startStore(): void {
  if (started) return;
  started = true;
  current = readLocation();
  if (!window.location.hash || window.location.hash === "#") {
    const tb = readTbState();
    if (tb) current = { ...tb, view: tb.view ?? "Overview" };
  }
  write(current, true);
  const sync = () => {
    const next = readLocation();
    if (!sameState(next, current)) {
      current = next;
      mirrorToTb(current);
      emit();
    }
  };
  window.addEventListener("popstate", sync);
  window.addEventListener("hashchange", sync);
}

export function getState(): AppState {
  return current;
}

/**
 * Applies a patch; keys set to undefined or "" are removed. `replace` rewrites the
 * current history entry instead of adding one.
 */
export function setState(patch: Partial<AppState>, replace = false): void {
  const next = { ...current } as Record<string, string | undefined>;
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined || v === null || v === "") delete next[k];
    else next[k] = v as string;
  }
  const st = next as AppState;
  if (!st.view) st.view = "Overview";
  if (sameState(st, current)) return;
  current = st;
  write(st, replace);
  emit();
}

function subscribe(l: Listener): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

export function useAppState(): AppState {
  return useSyncExternalStore(subscribe, getState, getState);
}
