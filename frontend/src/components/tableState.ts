// A table's sort, page, page size and filter, kept in the URL (state/url: "<id>.sort",
// "<id>.page", "<id>.size", "<id>.q") so that a copied link opens the table as it was seen,
// and what its Export CSV button says it will write.
//
// Which table is which: a view passes no id, so one is derived from what stays the same
// between two openings of the same link -- the view and the table's column ids (code
// constants; a column that depends on the trace, such as Operator's "Python", is there or
// not for both openings alike). Not from the export name: it carries run, worker and span
// names and the range, which differ between tables that are the same. `urlKey` names a
// table explicitly. Two mounted tables that come out with the same id share nothing: the
// first one mounted keeps the URL, the others keep their state in memory; so do tables
// inside another table's expanded row (the expansion is not in the URL, so there is
// nothing to restore them into).

import { createContext, useContext, useLayoutEffect, useMemo, useState, useSyncExternalStore } from "react";
import type { SortingState } from "@tanstack/react-table";
import { setState, useAppState } from "../state/store";
import { TABLE_ID, type AppState, type TableKey } from "../state/url";
import { showBidiControls } from "../util/bidi";
import { fmtCount } from "../util/format";

export interface TableState {
  sorting: SortingState;
  /** 0-based; the URL holds it 1-based ("page=2" is the second page) */
  pageIndex: number;
  pageSize: number;
  filter: string;
}

export interface TableDefaults {
  sorting: SortingState;
  pageSize: number;
}

/** What a table keeps in the URL: not the sort the server does, nor a filter its view holds. */
export interface TableUrlParts {
  sort: boolean;
  filter: boolean;
}

export const PAGE_SIZES = [25, 50, 100, 250, 1000];
/** "none": the user turned the table's default sort off (an absent key means the default). */
const NO_SORT = "none";
const MAX_SORT_COLUMNS = 4;
const MAX_FILTER = 500;

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * The table's id in the URL: `urlKey` when it is a valid id, else "t" and four base-36
 * digits of a hash of the view and the column ids.
 */
export function tableId(view: string, colIds: readonly string[], urlKey?: string): string {
  if (urlKey && TABLE_ID.test(urlKey)) return urlKey;
  const h = fnv1a(`${view}|${colIds.join(",")}`) % 36 ** 4;
  return "t" + h.toString(36).padStart(4, "0");
}

function key(id: string, field: "sort" | "page" | "q" | "size"): TableKey {
  return `${id}.${field}`;
}

/** "-dself,calls": descending Device self, then ascending Calls; "none": unsorted. */
export function encodeSort(sorting: SortingState): string {
  return sorting.length ? sorting.map((s) => (s.desc ? "-" : "") + s.id).join(",") : NO_SORT;
}

/** The sort a URL value names, or null when it names a column this table lacks (or is garbage). */
export function decodeSort(text: string | undefined, colIds: readonly string[]): SortingState | null {
  if (text === undefined) return null;
  if (text === NO_SORT) return [];
  const parts = text.split(",");
  if (parts.length > MAX_SORT_COLUMNS) return null;
  const out: SortingState = [];
  for (const p of parts) {
    const desc = p.startsWith("-");
    const id = desc ? p.slice(1) : p;
    if (!colIds.includes(id) || out.some((s) => s.id === id)) return null;
    out.push({ id, desc });
  }
  return out;
}

function positiveInt(text: string | undefined): number | null {
  if (text === undefined || !/^[1-9][0-9]{0,6}$/.test(text)) return null;
  return Number(text);
}

/** The table's state held by the app state; a value that is missing or not valid is the default. */
export function readTableState(st: Partial<AppState>, id: string, defaults: TableDefaults, colIds: readonly string[]): TableState {
  const size = positiveInt(st[key(id, "size")]);
  const page = positiveInt(st[key(id, "page")]);
  return {
    sorting: decodeSort(st[key(id, "sort")], colIds) ?? defaults.sorting,
    pageIndex: page === null ? 0 : page - 1,
    pageSize: size !== null && PAGE_SIZES.includes(size) ? size : defaults.pageSize,
    filter: (st[key(id, "q")] ?? "").slice(0, MAX_FILTER),
  };
}

/** The patch (store.setState) that writes a table's state: a default value is removed, not written. */
export function tablePatch(id: string, next: TableState, defaults: TableDefaults, parts: TableUrlParts): Partial<AppState> {
  const sort = encodeSort(next.sorting);
  const patch: Partial<Record<TableKey, string | undefined>> = {
    [key(id, "sort")]: parts.sort && sort !== encodeSort(defaults.sorting) ? sort : undefined,
    [key(id, "page")]: next.pageIndex > 0 ? String(next.pageIndex + 1) : undefined,
    [key(id, "size")]: next.pageSize !== defaults.pageSize ? String(next.pageSize) : undefined,
    [key(id, "q")]: parts.filter && next.filter ? next.filter.slice(0, MAX_FILTER) : undefined,
  };
  return patch as Partial<AppState>;
}

// -- which mounted table owns an id --------------------------------------------------

const holders = new Map<string, object[]>();
const claimListeners = new Set<() => void>();
let claimVersion = 0;

function claimsChanged(): void {
  claimVersion++;
  for (const l of claimListeners) l();
}

function subscribeClaims(l: () => void): () => void {
  claimListeners.add(l);
  return () => claimListeners.delete(l);
}

/** Registers `me` as a holder of `id` (in mount order); returns the release. */
export function claimTableId(id: string, me: object): () => void {
  holders.set(id, [...(holders.get(id) ?? []), me]);
  claimsChanged();
  return () => {
    const rest = (holders.get(id) ?? []).filter((x) => x !== me);
    if (rest.length) holders.set(id, rest);
    else holders.delete(id);
    claimsChanged();
  };
}

/** Whether `me` may use the URL for `id`: it is the first holder (or none registered yet). */
export function ownsTableId(id: string, me: object): boolean {
  const list = holders.get(id);
  return !list || list.length === 0 || list[0] === me;
}

/** True inside a table's expanded row: a table there keeps its state in memory. */
export const InsideTable = createContext(false);

function defaultState(d: TableDefaults): TableState {
  return { sorting: d.sorting, pageIndex: 0, pageSize: d.pageSize, filter: "" };
}

/**
 * The table's state and its setter: from the URL when `id` is given (and no other mounted
 * table holds it), else in memory. The setter takes the whole next state.
 */
export function useTableState(id: string | null, defaults: TableDefaults, colIds: readonly string[], parts: TableUrlParts): [TableState, (next: TableState) => void] {
  const nested = useContext(InsideTable);
  const urlId = nested ? null : id;
  const [me] = useState(() => ({}));
  useSyncExternalStore(subscribeClaims, () => claimVersion, () => claimVersion);
  // A layout effect: the claim is made before the browser paints, so a second table with
  // the same id re-renders without the URL's state before anyone sees it. Until then a
  // table with no rival reads the URL from its first render (a link opens as it was).
  useLayoutEffect(() => (urlId ? claimTableId(urlId, me) : undefined), [urlId, me]);
  const bound = urlId !== null && ownsTableId(urlId, me);
  const app = useAppState();
  const [local, setLocal] = useState<TableState>(() => defaultState(defaults));
  // re-read when this table's four keys change, not on every change of the app state
  const raw = bound && urlId ? JSON.stringify((["sort", "page", "size", "q"] as const).map((f) => app[key(urlId, f)] ?? null)) : "";
  const sig = `${encodeSort(defaults.sorting)}|${defaults.pageSize}|${colIds.join(",")}`;
  const fromUrl = useMemo(
    () => (bound && urlId ? readTableState(app, urlId, defaults, colIds) : null),
    [bound, urlId, raw, sig], // eslint-disable-line react-hooks/exhaustive-deps
  );
  if (fromUrl && urlId) {
    return [fromUrl, (next) => setState(tablePatch(urlId, next, defaults, parts), true)];
  }
  return [local, setLocal];
}

// -- what Export CSV writes ------------------------------------------------------------

export interface ExportWhat {
  /** rows the file holds (the filtered rows, every page) */
  shown: number;
  /** rows of the table */
  total: number;
  filter: string;
  /** the sort, by column header */
  sort: { header: string; desc: boolean }[];
}

const FILTER_SHOWN = 24;

function rowsWord(n: number): string {
  return `${fmtCount(n)} row${n === 1 ? "" : "s"}`;
}

function describe(w: ExportWhat, filterMax: number): string[] {
  const parts: string[] = [];
  if (w.filter) {
    const f = showBidiControls(w.filter);
    parts.push(`${fmtCount(w.shown)} of ${rowsWord(w.total)}`, `filtered '${f.length > filterMax ? f.slice(0, filterMax - 1) + "…" : f}'`);
  } else {
    parts.push(w.total === 0 ? "no rows" : w.total === 1 ? "the 1 row" : `all ${rowsWord(w.total)}`);
  }
  if (w.sort.length) parts.push("sorted by " + w.sort.map((s) => `${s.header} ${s.desc ? "▼" : "▲"}`).join(", then "));
  return parts;
}

/** The button's text: "Export CSV (20 of 312 rows, filtered 'conv', sorted by Device self ▼)". */
export function exportLabel(w: ExportWhat): string {
  return `Export CSV (${describe(w, FILTER_SHOWN).join(", ")})`;
}

/** The button's hover text: the same, with the whole filter and the file's name. */
export function exportTitle(w: ExportWhat, fileName: string): string {
  return `Download ${describe(w, Infinity).join(", ")}, every page, as ${fileName} (exact values, units in the headers)`;
}
