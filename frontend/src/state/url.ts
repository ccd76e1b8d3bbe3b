// The app's state lives in the URL so views can be linked and the back button works.
//
// Our own document's hash holds it ("#view=Operator&run=r1&group=...") in both setups:
// standalone it is the page's address; inside TensorBoard it is the plugin iframe's
// address, which shares the browser's joint session history, so Back steps through it.
// Inside TensorBoard we also mirror it into TensorBoard's own hash as
// "p.pytorch_profiler.<key>=<value>" entries -- the keys TensorBoard's plugin API
// (experimental.GetURLPluginData) reserves for plugins -- so the address bar is a deep
// link, and read them back on start.
//
// The iframe document has <base href="plugin/pytorch_profiler/">: a relative "#..."
// URL would resolve against the base, so URLs are always built from location.href.

export const PLUGIN_NAME = "pytorch_profiler";
const TB_PREFIX = `p.${PLUGIN_NAME}.`;

export type ViewId =
  | "Overview" | "Operator" | "Kernel" | "Trace" | "Memory" | "Module" | "Distributed" | "Diff";

export const VIEW_IDS: ViewId[] = [
  "Overview", "Operator", "Kernel", "Trace", "Memory", "Module", "Distributed", "Diff",
];

/** Every key the URL may hold, in the order they are written. */
export const STATE_KEYS = [
  "run", "worker", "span", "view",
  // Operator / Kernel
  "group", "kgroup", "q", "top",
  // Trace (tmode=ranks: the Ranks mode, ranks: the ranks it shows; r0/r1: the range selected on the ruler;
  // cp: the step whose critical path is highlighted)
  "t0", "t1", "ev", "tmode", "ranks", "r0", "r1", "cp",
  // Trace: a search to start with (find: a recommendation's link shows the events it counts)
  "find",
  // Memory
  "dev", "m0", "m1",
  // Module
  "step",
  // Diff
  "erun", "eworker", "espan",
] as const;

export type StateKey = (typeof STATE_KEYS)[number];

/**
 * A table's own view state (components/tableState): "<table id>.<field>", e.g.
 * "t0k3x.sort=-dself&t0k3x.page=2". Tables come and go with the views, so these keys are
 * a pattern rather than entries of STATE_KEYS; they are written after those, sorted.
 */
export const TABLE_FIELDS = ["sort", "page", "q", "size"] as const;
export type TableField = (typeof TABLE_FIELDS)[number];
export type TableKey = `${string}.${TableField}`;
/** A table id: short, lower-case, URL-safe (no escaping needed in either hash). */
export const TABLE_ID = /^[a-z0-9][a-z0-9_-]{0,39}$/;
const TABLE_KEY = new RegExp(`^${TABLE_ID.source.slice(1, -1)}\\.(?:${TABLE_FIELDS.join("|")})$`);

export function isTableKey(k: string): k is TableKey {
  return TABLE_KEY.test(k);
}

/** badView: the URL's view when it names none of VIEW_IDS (the app says so, never a silent Overview). */
export type AppState = Partial<Record<StateKey, string>> & Partial<Record<TableKey, string>> & { view: ViewId; badView?: string };

const KEY_SET = new Set<string>(STATE_KEYS);

function isKey(k: string): boolean {
  return KEY_SET.has(k) || isTableKey(k);
}

/** The state's non-empty entries in the order a hash holds them: STATE_KEYS, then table keys sorted. */
function orderedEntries(st: Partial<AppState>): [string, string][] {
  const rec = st as Record<string, unknown>;
  const out: [string, string][] = [];
  const put = (k: string) => {
    const v = rec[k];
    if (v !== undefined && v !== null && v !== "") out.push([k, String(v)]);
  };
  for (const k of STATE_KEYS) put(k);
  for (const k of Object.keys(rec).filter(isTableKey).sort()) put(k);
  return out;
}

/** The table keys a state holds. */
export function tableKeys(st: Partial<AppState>): TableKey[] {
  return Object.keys(st).filter(isTableKey);
}

/**
 * The patch (store.setState: undefined removes) that turns state `from` into `to`: a link
 * followed replaces the whole state, it does not add to it.
 */
export function patchTo(from: Partial<AppState>, to: Partial<AppState>): Partial<AppState> {
  const patch: Record<string, string | undefined> = {};
  for (const k of Object.keys(from)) patch[k] = undefined;
  for (const [k, v] of orderedEntries(to)) patch[k] = v;
  patch.badView = to.badView;
  return patch as Partial<AppState>;
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, " "));
  } catch {
    return s;
  }
}

function encode(s: string): string {
  // encodeURIComponent keeps the characters that are safe in a fragment readable
  return encodeURIComponent(s).replace(/%2F/g, "/").replace(/%3A/g, ":");
}

/** Splits "a=1&b=2" (with or without a leading "#" or "?") into ordered pairs. */
export function splitPairs(text: string): [string, string | null][] {
  const t = text.replace(/^[#?]/, "");
  if (!t) return [];
  return t.split("&").filter(Boolean).map((part) => {
    const eq = part.indexOf("=");
    return eq < 0 ? [decode(part), null] : [decode(part.slice(0, eq)), decode(part.slice(eq + 1))];
  });
}

function normalizeView(v: string | null | undefined): ViewId {
  if (!v) return "Overview";
  const hit = VIEW_IDS.find((x) => x.toLowerCase() === v.toLowerCase());
  return hit ?? "Overview";
}

/** The URL's view when it is not one of VIEW_IDS (empty or missing is Overview, not bad). */
function badView(v: string | undefined): { badView?: string } {
  return v && !VIEW_IDS.some((x) => x.toLowerCase() === v.toLowerCase()) ? { badView: v } : {};
}

/** The state held by a hash; unknown keys are ignored, a bad view is Overview with badView set. */
export function parseState(hash: string): AppState {
  const st: Record<string, string> = {};
  for (const [k, v] of splitPairs(hash)) {
    if (isKey(k) && v !== null && v !== "") st[k] = v;
  }
  return { ...st, view: normalizeView(st.view), ...badView(st.view) };
}

/** The hash for a state (without "#"), keys in a fixed order, empty values left out. */
export function serializeState(st: Partial<AppState>): string {
  return orderedEntries(st).map(([k, v]) => `${k}=${encode(v)}`).join("&");
}

/** Whether two states hold the same values. */
export function sameState(a: Partial<AppState>, b: Partial<AppState>): boolean {
  return serializeState(a) === serializeState(b);
}

/** The state carried by TensorBoard's hash ("#pytorch_profiler&p.pytorch_profiler.run=x"). */
export function stateFromTbHash(tbHash: string): Partial<AppState> | null {
  const st: Record<string, string> = {};
  let found = false;
  for (const [k, v] of splitPairs(tbHash)) {
    if (k.startsWith(TB_PREFIX) && v !== null) {
      const key = k.slice(TB_PREFIX.length);
      if (isKey(key) && v !== "") {
        st[key] = v;
        found = true;
      }
    }
  }
  return found ? { ...st, view: normalizeView(st.view), ...badView(st.view) } : null;
}

/**
 * TensorBoard's hash with our entries replaced by `st`; TensorBoard's own entries
 * (the active plugin first, its other settings) are kept as they are, in order.
 */
export function mergeIntoTbHash(tbHash: string, st: Partial<AppState>): string {
  const raw = tbHash.replace(/^#/, "");
  const keep = raw
    ? raw.split("&").filter((part) => part && !decode(part.split("=")[0]).startsWith(TB_PREFIX))
    : [];
  const ours = orderedEntries(st).map(([k, v]) => `${encodeURIComponent(TB_PREFIX + k)}=${encodeURIComponent(v)}`);
  return "#" + [...keep, ...ours].join("&");
}

/** location.href with its fragment replaced (never a relative "#...": see <base>). */
export function hrefWithHash(href: string, hash: string): string {
  const i = href.indexOf("#");
  const base = i < 0 ? href : href.slice(0, i);
  return hash ? `${base}#${hash}` : base;
}
