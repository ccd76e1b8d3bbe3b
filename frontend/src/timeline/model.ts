// The timeline's layout constants and the shapes its owner hands it (counter tracks, arrows,
// the highlight strip), shared by the component (Timeline), its drawing (draw) and the views
// that feed it; Timeline re-exports them, so views import them from there.

export const RULER_H = 26;
export const ROW_H = 18;
export const HEADER_H = 18;
export const GAP = 2;

export const COUNTER_H = 40;

/** A counter drawn as a step area above the tracks (device utilization, memory allocated). */
export interface Counter {
  name: string;
  /** [time ns, value] sorted by time; null = unknown */
  points: [number, number | null][];
  format: (v: number) => string;
  /** "utilization" | "memory": picks the fill */
  kind?: string;
  /** the value at the top of the track (default: the largest value shown) */
  max?: number;
}

/** One end of an arrow: an event's start on its track row. */
export interface FlowEnd {
  i: number;
  ts_ns: number;
  track: number;
  depth: number;
}

export interface FlowLink {
  from: FlowEnd;
  to: FlowEnd;
  /** launch, fwdbwd, operator (a kernel's issuing op: dashed), flow */
  kind?: string;
  /** drawn thin and pale: flows in view that do not touch the selection */
  faint?: boolean;
}

/** A span of the highlight strip: kind device / device_gap (device color), sync, other, else host. */
export interface HighlightSpan {
  start: number;
  end: number;
  kind: string;
}

export const HIGHLIGHT_STRIP_H = 4;

/** The outline of highlighted events, and the strip's color per span kind; readable on light and dark. */
export function highlightColor(kind: string | null, dark: boolean): string {
  if (kind === "device" || kind === "device_gap") return dark ? "#7aa2ff" : "#3056c8";
  if (kind === "sync") return dark ? "#ff6b6b" : "#c5221f";
  if (kind === "other") return dark ? "#9aa0a6" : "#80868b";
  return dark ? "#ffa53d" : "#e8590c"; // the outline and the host kinds: orange
}
