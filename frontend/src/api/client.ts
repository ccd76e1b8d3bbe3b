// Talks to the plugin's routes (docs/api.md). URLs are resolved against the bundle's
// own address (import.meta.url): the bundle is served from the same prefix as the
// routes (/data/plugin/pytorch_profiler/) inside TensorBoard and standalone, under any
// path prefix, whatever the document's <base>.

import type { LoadingReply } from "./types/status";

export type Params = Record<string, string | number | null | undefined>;

let base: string | null = null;

export function apiBase(): string {
  if (base === null) {
    try {
      base = import.meta.env.DEV && typeof location !== "undefined"
        ? new URL("/data/plugin/pytorch_profiler/", location.href).href // vite dev server, proxied
        : new URL(/* @vite-ignore */ "./", import.meta.url).href;
    } catch {
      base = "./";
    }
  }
  return base;
}

/** For tests and embedding. */
export function setApiBase(b: string): void {
  base = b.endsWith("/") ? b : b + "/";
}

/** "route?a=1&b=2" with empty parameters left out, in a stable order. */
export function routeUrl(route: string, params: Params = {}): string {
  const q = new URLSearchParams();
  for (const k of Object.keys(params).sort()) {
    const v = params[k];
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const qs = q.toString();
  return qs ? `${route}?${qs}` : route;
}

export function absoluteUrl(route: string, params: Params = {}): string {
  return new URL(routeUrl(route, params), apiBase()).href;
}

export class ApiError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export type Progress = (p: LoadingReply) => void;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new DOMException("aborted", "AbortError"));
    }, { once: true });
  });
}

/**
 * GETs a JSON route. A 202 {"loading": true} answer (trace still loading) is
 * reported through onProgress and asked again after retry_after_ms; an error answer
 * becomes an ApiError with the server's message.
 */
export async function getJson<T>(route: string, params: Params = {}, signal?: AbortSignal, onProgress?: Progress): Promise<T> {
  return getRelative<T>(routeUrl(route, params), signal, onProgress);
}

/** getJson for a relative URL already holding its query ("overview?run=r"). */
export async function getRelative<T>(rel: string, signal?: AbortSignal, onProgress?: Progress): Promise<T> {
  const url = new URL(rel, apiBase()).href;
  for (let attempt = 0; ; attempt++) {
    const resp = await fetch(url, { signal, credentials: "same-origin", headers: { Accept: "application/json" } });
    if (resp.status === 202) {
      let body: LoadingReply = { loading: true };
      try {
        body = (await resp.json()) as LoadingReply;
      } catch {
        // keep the default
      }
      onProgress?.(body);
      const wait = Math.min(Math.max(body.retry_after_ms ?? 500, 200), 5000);
      await sleep(attempt > 100 ? 5000 : wait, signal);
      continue;
    }
    if (!resp.ok) {
      let msg = `${resp.status} ${resp.statusText}`;
      try {
        const text = await resp.text();
        try {
          const j = JSON.parse(text);
          if (j && typeof j.error === "string") msg = j.error;
        } catch {
          if (text && text.length < 500) msg = `${msg}: ${text}`;
        }
      } catch {
        // keep the status text
      }
      throw new ApiError(resp.status, msg);
    }
    return (await resp.json()) as T;
  }
}
