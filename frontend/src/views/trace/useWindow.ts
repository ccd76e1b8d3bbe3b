// The timeline's window, fetched from the server per viewport (debounced while zooming
// and panning) and mirrored into the URL (t0/t1, replace: zooming does not fill the
// history). Shared by the single-trace view (route `trace`) and the Ranks mode
// (route `trace/ranks`): both answer the same shape (docs/api.md).

import { useEffect, useRef, useState } from "react";
import { getJson, type Params } from "../../api/client";
import type { LoadingReply } from "../../api/types/status";
import type { TimelineReply } from "../../api/types/trace";
import { setState } from "../../state/store";
import { fromWire, type WireReply } from "./wire";
import type { Range, Viewport } from "../../timeline/coords";

function parseNs(s: string | undefined): number | null {
  if (!s || !/^\d+$/.test(s)) return null;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : null;
}

export interface TimelineWindow<T extends TimelineReply> {
  data: T | null;
  bounds: Range | null;
  vp: Viewport | null;
  setVp: (v: Viewport) => void;
  error: Error | null;
  progress: LoadingReply | null;
  loading: boolean;
  /** the canvas's width in px (the Timeline reports it through onViewport) */
  width: React.MutableRefObject<number>;
}

/**
 * `route` with `params` (null: ask nothing yet) for the window in view; `selKey` changes
 * when the selection changes (start over: whole trace); t0/t1: the window in the URL.
 */
export function useTimelineWindow<T extends TimelineReply>(route: string, params: Params | null, selKey: string, t0s?: string, t1s?: string): TimelineWindow<T> {
  const [data, setData] = useState<T | null>(null);
  const [bounds, setBounds] = useState<Range | null>(null);
  const [vp, setVp] = useState<Viewport | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [progress, setProgress] = useState<LoadingReply | null>(null);
  const [loading, setLoading] = useState(false);
  const width = useRef(1200);

  // a new selection: start over
  useEffect(() => {
    setData(null);
    setBounds(null);
    setVp(null);
    setError(null);
  }, [selKey]);

  const t0 = parseNs(t0s);
  const t1 = parseNs(t1s);

  const want = vp ?? (t0 !== null && t1 !== null && t1 > t0 ? { start: t0, end: t1, width: width.current } : null);
  const reqStart = want ? Math.floor(want.start) : null;
  const reqEnd = want ? Math.ceil(want.end) : null;
  const reqWidth = Math.min(10000, Math.max(100, Math.round(want?.width ?? width.current)));
  const asking = params !== null;
  useEffect(() => {
    if (!asking) return;
    const ctrl = new AbortController();
    const timer = setTimeout(() => {
      setLoading(true);
      getJson<WireReply<T>>(route, { ...params, start_ns: reqStart ?? undefined, end_ns: reqEnd ?? undefined, width: reqWidth }, ctrl.signal, (p) => setProgress(p))
        .then(fromWire)
        .then((r) => {
          setProgress(null);
          setError(null);
          setData(r);
          setLoading(false);
          const b = { start: r.span.start_ns, end: Math.max(r.span.end_ns, r.span.start_ns + 1) };
          setBounds((old) => (old && old.start === b.start && old.end === b.end ? old : b));
          setVp((old) => old ?? { start: r.window.start_ns, end: Math.max(r.window.end_ns, r.window.start_ns + 1), width: width.current });
        })
        .catch((e: unknown) => {
          if (ctrl.signal.aborted) return;
          setLoading(false);
          setError(e instanceof Error ? e : new Error(String(e)));
        });
    }, data ? 150 : 0);
    return () => {
      clearTimeout(timer);
      ctrl.abort();
    };
  }, [route, selKey, asking, reqStart, reqEnd, reqWidth]); // eslint-disable-line react-hooks/exhaustive-deps

  // the window in the URL (replace: zooming does not fill the history). The timer checks the
  // window is still the one it was set for: a timer can fire after a newer window has been
  // rendered but before the effects that clear it have run (a fetch-driven jump on a busy
  // machine), and writing the old window then would pull the view back to it through the
  // Back/Forward effect below.
  const current = useRef(vp);
  current.current = vp;
  useEffect(() => {
    if (!vp || !bounds) return;
    const whole = vp.start <= bounds.start && vp.end >= bounds.end;
    const timer = setTimeout(() => {
      const now = current.current;
      if (!now || now.start !== vp.start || now.end !== vp.end) return;
      setState({ t0: whole ? undefined : String(Math.floor(vp.start)), t1: whole ? undefined : String(Math.ceil(vp.end)) }, true);
    }, 300);
    return () => clearTimeout(timer);
  }, [vp?.start, vp?.end, bounds]); // eslint-disable-line react-hooks/exhaustive-deps

  // Back/Forward or a link changed the window in the URL
  useEffect(() => {
    if (!vp || t0 === null || t1 === null) return;
    if (Math.abs(t0 - vp.start) > 1 || Math.abs(t1 - vp.end) > 1) setVp({ start: t0, end: t1, width: vp.width });
  }, [t0s, t1s]); // eslint-disable-line react-hooks/exhaustive-deps

  return { data, bounds, vp, setVp, error, progress, loading, width };
}
