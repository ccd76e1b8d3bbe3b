// Picks up to `max` ranks for the Trace view's Ranks mode: a button naming the chosen
// ranks opens a list of every rank, slowest first (mean step time, outliers flagged),
// with a filter and "N slowest" shortcuts. Worker names render isolated (components/Name).

import { useEffect, useMemo, useRef, useState } from "react";
import type { RankRow } from "../../api/types/distributed";
import { Name } from "../../components/Name";
import { fmtDuration } from "../../util/format";

export const MAX_RANKS = 8;

/** The chosen ranks: toggling one adds it (while fewer than max) or removes it; order kept slowest first. */
export function toggleRank(chosen: number[], rank: number, order: number[], max = MAX_RANKS): number[] {
  const set = new Set(chosen);
  if (set.has(rank)) set.delete(rank);
  else if (set.size < max) set.add(rank);
  const pos = new Map(order.map((r, i) => [r, i]));
  return [...set].sort((a, b) => (pos.get(a) ?? 1e9) - (pos.get(b) ?? 1e9) || a - b);
}

/** "3,7,12" from the URL: the ranks that exist, at most max, no repeats; null when none given. */
export function parseRanks(s: string | undefined, known: Set<number>, max = MAX_RANKS): number[] | null {
  if (!s) return null;
  const out: number[] = [];
  for (const part of s.split(",")) {
    if (!/^\d+$/.test(part.trim())) continue;
    const r = Number(part.trim());
    if (known.has(r) && !out.includes(r) && out.length < max) out.push(r);
  }
  return out.length ? out : null;
}

export function RankPicker({ rows, chosen, onChange }: { rows: RankRow[]; chosen: number[]; onChange: (ranks: number[]) => void }) {
  const [open, setOpen] = useState(false);
  const [filter, setFilter] = useState("");
  const box = useRef<HTMLDivElement>(null);
  const order = useMemo(() => rows.map((r) => r.rank), [rows]);
  useEffect(() => {
    if (!open) return;
    const close = (e: MouseEvent) => {
      if (box.current && !box.current.contains(e.target as Node)) setOpen(false);
    };
    document.addEventListener("mousedown", close);
    return () => document.removeEventListener("mousedown", close);
  }, [open]);
  const needle = filter.trim().toLowerCase();
  const shown = needle ? rows.filter((r) => `rank ${r.rank} ${r.worker}`.toLowerCase().includes(needle)) : rows;
  const full = chosen.length >= MAX_RANKS;
  return (
    <div className="rank-picker" ref={box}>
      <button type="button" className="small" aria-expanded={open} aria-haspopup="dialog" onClick={() => setOpen((o) => !o)} title="Pick the ranks to show (at most 8)">
        Ranks: {chosen.join(", ") || "none"} ▾
      </button>
      {open && (
        <div className="rank-picker-pop" role="dialog" aria-label="Pick ranks">
          <div className="row">
            <input type="search" className="filter" placeholder="Filter ranks…" value={filter} onChange={(e) => setFilter(e.target.value)} aria-label="Filter ranks" />
            {[4, 8].map((n) => (
              <button key={n} type="button" className="small" onClick={() => onChange(order.slice(0, n))}>
                {n} slowest
              </button>
            ))}
            <button type="button" className="icon-btn" aria-label="Close" onClick={() => setOpen(false)}>✕</button>
          </div>
          <div className="muted">
            {chosen.length} of at most {MAX_RANKS} chosen; slowest first.
          </div>
          <ul>
            {shown.map((r) => {
              const on = chosen.includes(r.rank);
              return (
                <li key={r.rank}>
                  <label title={r.outlier ? r.outlier_reason ?? "outlier" : undefined}>
                    <input type="checkbox" checked={on} disabled={!on && full} data-rank={r.rank} onChange={() => onChange(toggleRank(chosen, r.rank, order))} />
                    <b className={r.outlier ? "worse" : undefined}>{r.outlier ? "⚠ " : ""}rank {r.rank}</b>
                    <Name className="mono" text={r.worker} />
                    <span className="muted">{fmtDuration(r.step_ns)} / step</span>
                  </label>
                </li>
              );
            })}
          </ul>
        </div>
      )}
    </div>
  );
}
