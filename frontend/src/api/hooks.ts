// useApi: fetch a route for a component, with the 202 "still loading" progress, a
// small cache (switching tabs does not refetch), and the last data kept while a new
// request runs (keepStale) so charts do not flash.

import { useEffect, useRef, useState, useSyncExternalStore } from "react";
import { ApiError, getRelative, routeUrl, type Params } from "./client";
import type { LoadingReply } from "./types/status";

const cache = new Map<string, unknown>();
const MAX_CACHE = 200;
let generation = 0;
const genListeners = new Set<() => void>();

/** Forgets every cached answer and makes mounted views fetch again. */
export function reloadAll(): void {
  cache.clear();
  generation++;
  for (const l of genListeners) l();
}

function useGeneration(): number {
  return useSyncExternalStore(
    (l) => {
      genListeners.add(l);
      return () => genListeners.delete(l);
    },
    () => generation,
  );
}

export interface ApiState<T> {
  data: T | null;
  error: Error | null;
  loading: boolean;
  progress: LoadingReply | null;
}

export function useApi<T>(route: string | null, params: Params = {}, opts: { keepStale?: boolean; noCache?: boolean; tick?: number } = {}): ApiState<T> {
  const gen = useGeneration();
  const key = route === null ? null : routeUrl(route, params);
  const cached = key !== null && !opts.noCache ? (cache.get(key) as T | undefined) : undefined;
  // `of`: the key the state answers. After the key changes the old answer is still in
  // state for one render; handing it out then would let callers derive new requests from
  // another route's answer (e.g. a previous run's worker), so it is withheld unless asked.
  const [state, setStateRaw] = useState<ApiState<T> & { of: string | null }>({ data: cached ?? null, error: null, loading: key !== null && cached === undefined, progress: null, of: key });
  const setState = (next: ApiState<T> | ((s: ApiState<T>) => ApiState<T>)) =>
    setStateRaw((s) => ({ ...(typeof next === "function" ? next(s) : next), of: key }));
  const lastKey = useRef<string | null>(null);

  useEffect(() => {
    if (key === null) {
      setState({ data: null, error: null, loading: false, progress: null });
      return;
    }
    const hit = opts.noCache ? undefined : (cache.get(key) as T | undefined);
    if (hit !== undefined) {
      lastKey.current = key;
      setState({ data: hit, error: null, loading: false, progress: null });
      return;
    }
    const ctrl = new AbortController();
    setState((s) => ({ data: opts.keepStale ? s.data : null, error: null, loading: true, progress: null }));
    getRelative<T>(key, ctrl.signal, (p) => setState((s) => ({ ...s, progress: p })))
      .then((data) => {
        if (!opts.noCache) {
          if (cache.size >= MAX_CACHE) cache.delete(cache.keys().next().value as string);
          cache.set(key, data);
        }
        lastKey.current = key;
        setState({ data, error: null, loading: false, progress: null });
      })
      .catch((e: unknown) => {
        if (ctrl.signal.aborted) return;
        const err = e instanceof Error ? e : new Error(String(e));
        setState({ data: null, error: err, loading: false, progress: null });
      });
    return () => ctrl.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, gen, opts.tick]);

  if (state.of !== key && !opts.keepStale) {
    return { data: cached ?? null, error: null, loading: key !== null && cached === undefined, progress: null };
  }
  return state;
}

export function isNotFound(e: Error | null): boolean {
  return e instanceof ApiError && e.status === 404;
}
