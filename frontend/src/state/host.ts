// Where the app runs: inside TensorBoard's plugin iframe (data/plugin_entry.html,
// same origin as TensorBoard's page) or standalone (`tb-profiler serve`, "/").

import { PLUGIN_NAME, hrefWithHash, mergeIntoTbHash, splitPairs, stateFromTbHash, type AppState } from "./url";

export function inTensorBoard(): boolean {
  try {
    return window.parent !== window && /\/data\/plugin_entry\.html$/.test(window.location.pathname);
  } catch {
    return false;
  }
}

/** TensorBoard's window when it is ours to read (same origin), else null. */
export function tbWindow(): Window | null {
  if (!inTensorBoard()) return null;
  try {
    const p = window.parent;
    void p.location.href; // throws when cross-origin
    return p;
  } catch {
    return null;
  }
}

/** Deep-link state from TensorBoard's address ("p.pytorch_profiler.<key>=..."). */
export function readTbState(): Partial<AppState> | null {
  const p = tbWindow();
  if (!p) return null;
  try {
    return stateFromTbHash(p.location.hash);
  } catch {
    return null;
  }
}

/**
 * Writes our state into TensorBoard's hash (replaceState: no history entry, no
 * hashchange for TensorBoard to react to), only while our tab is the active one.
 */
export function mirrorToTb(st: Partial<AppState>): void {
  const p = tbWindow();
  if (!p) return;
  try {
    const first = splitPairs(p.location.hash)[0];
    if (!first || first[0] !== PLUGIN_NAME || first[1] !== null) return;
    const next = mergeIntoTbHash(p.location.hash, st);
    if (next !== p.location.hash) {
      p.history.replaceState(p.history.state, "", hrefWithHash(p.location.href, next.slice(1)));
    }
  } catch {
    // TensorBoard's page is not ours to touch: the iframe's own address still works
  }
}

/**
 * Calls `cb` with the state of a link opened in the TensorBoard tab we run in: a Copy link
 * address pasted into the address bar of an open TensorBoard changes only TensorBoard's
 * hash, so nothing reloads -- TensorBoard (2.x) keeps our iframe as it is and tells its
 * plugins nothing (its plugin API has no "URL changed" message; GetURLPluginData answers
 * only when asked). Its window is ours to read (same origin), so we listen to its
 * hashchange. Back and Forward across such entries fire it too. replaceState, which
 * mirrorToTb uses, fires none: our own writes do not come back here.
 *
 * Followed only while TensorBoard shows our tab and the hash holds our entries: a bare
 * "#pytorch_profiler" (TensorBoard's own tab link) or another plugin's tab leaves the app as it is.
 */
export function onTbHashChange(cb: (st: AppState) => void): () => void {
  const p = tbWindow();
  if (!p) return () => {};
  const on = () => {
    let hash: string;
    try {
      hash = p.location.hash;
    } catch {
      return;
    }
    const first = splitPairs(hash)[0];
    if (!first || first[0] !== PLUGIN_NAME || first[1] !== null) return;
    const st = stateFromTbHash(hash);
    if (st) cb({ ...st, view: st.view ?? "Overview" });
  };
  // the listener lives on TensorBoard's window: it is removed when our document goes away
  // (TensorBoard drops the iframe when another tab is opened), or it would outlive us
  const off = () => {
    try {
      p.removeEventListener("hashchange", on);
    } catch {
      // TensorBoard's page is gone already
    }
    window.removeEventListener("pagehide", off);
  };
  try {
    p.addEventListener("hashchange", on);
  } catch {
    return () => {};
  }
  window.addEventListener("pagehide", off);
  return off;
}

/**
 * TensorBoard's plugin IPC (tensorboard/components/experimental/plugin_util): a
 * MessagePort handed to the host with "experimental.bootstrap"; the host broadcasts
 * "experimental.DataReloaded" when its reload button (or auto-reload) fires.
 */
export function onTbReload(cb: () => void): () => void {
  if (!inTensorBoard()) return () => {};
  let port: MessagePort | null = null;
  try {
    const ch = new MessageChannel();
    port = ch.port1;
    port.onmessage = (e: MessageEvent) => {
      let m: { type?: string; id?: number; isReply?: boolean } | null = null;
      try {
        m = JSON.parse(String(e.data));
      } catch {
        return;
      }
      if (!m || m.isReply) return;
      if (m.type === "experimental.DataReloaded") cb();
      port?.postMessage(JSON.stringify({ type: m.type, id: m.id, payload: null, error: null, isReply: true }));
    };
    port.start();
    window.parent.postMessage("experimental.bootstrap", window.location.origin, [ch.port2]);
  } catch {
    return () => {};
  }
  return () => port?.close();
}

/**
 * The address a colleague can open to see what this page shows: TensorBoard's page with our
 * entries in its hash when we run inside it (the iframe's own address is not one a person
 * opens), else this page's. `st` should name the run, worker and span explicitly, so the
 * link keeps showing this span when later spans are written.
 */
export function shareLink(st: Partial<AppState>, serialized: string): string {
  const p = tbWindow();
  if (p) {
    try {
      const first = splitPairs(p.location.hash)[0];
      const base = first && first[0] === PLUGIN_NAME ? p.location.hash : `#${PLUGIN_NAME}`;
      return hrefWithHash(p.location.href, mergeIntoTbHash(base, st).slice(1));
    } catch {
      // fall through: the iframe's address
    }
  }
  return hrefWithHash(window.location.href, serialized);
}
