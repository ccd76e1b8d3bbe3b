// Data shaping of the many-rank Distributed sections (no React, no ECharts): ranks in
// slowest-first order, the disjoint parts of their stacked bars, outliers, the step ×
// rank heatmap's cells, the rank × rank bytes matrix, and clock corrections. Unit-tested in data.test.ts.

import type { DistRanksReply, RankRow } from "../../api/types/distributed";
import { fmtCount, fmtDuration } from "../../util/format";

/** The rows slowest first: the server's `order`, then any rank it left out by step time. */
export function orderRanks(reply: Pick<DistRanksReply, "ranks" | "order">): RankRow[] {
  const byRank = new Map(reply.ranks.map((r) => [r.rank, r]));
  const out: RankRow[] = [];
  const seen = new Set<number>();
  for (const k of reply.order ?? []) {
    const r = byRank.get(k);
    if (r && !seen.has(k)) {
      out.push(r);
      seen.add(k);
    }
  }
  const rest = reply.ranks.filter((r) => !seen.has(r.rank));
  rest.sort((a, b) => (b.step_ns ?? -1) - (a.step_ns ?? -1) || a.rank - b.rank);
  return [...out, ...rest];
}

/** A bar's disjoint parts (computation and communication include their overlap). */
export interface BarParts {
  rank: number;
  compOnly: number;
  overlap: number;
  commOnly: number;
  other: number;
}

export function barParts(r: RankRow): BarParts {
  const ov = r.overlap_ns ?? 0;
  return {
    rank: r.rank,
    compOnly: Math.max(0, (r.computation_ns ?? 0) - ov),
    overlap: Math.max(0, ov),
    commOnly: Math.max(0, (r.communication_ns ?? 0) - ov),
    other: Math.max(0, r.other_ns ?? 0),
  };
}

export function outliers(rows: RankRow[]): RankRow[] {
  return rows.filter((r) => r.outlier);
}

/** The axis label of a rank: "rank 7", "⚠ rank 7" for an outlier. */
export function rankLabel(r: Pick<RankRow, "rank" | "outlier">): string {
  return `${r.outlier ? "⚠ " : ""}rank ${r.rank}`;
}

/** "0–3, 5, 7–9": a sorted set of ranks in ranges. */
export function rankRanges(ranks: number[]): string {
  const xs = [...new Set(ranks)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < xs.length; ) {
    let j = i;
    while (j + 1 < xs.length && xs[j + 1] === xs[j] + 1) j++;
    parts.push(j === i ? String(xs[i]) : j === i + 1 ? `${xs[i]}, ${xs[j]}` : `${xs[i]}–${xs[j]}`);
    i = j + 1;
  }
  return parts.join(", ");
}

/** How many categories fit at `minPx` each in `px` pixels (at least 1, at most n). */
export function fitCount(n: number, px: number, minPx: number): number {
  return Math.max(1, Math.min(n, Math.floor(px / minPx)));
}

export interface Heatmap {
  /** y categories (ranks), top to bottom */
  ranks: number[];
  /** x categories (steps) */
  steps: number[];
  /** [step index, rank index, ns] for every known cell */
  cells: [number, number, number][];
  /** cells without a time (the rank did not run that step) */
  missing: number;
  min: number;
  max: number;
}

/**
 * The step × rank heatmap: every cell of the server's matrix, none binned or dropped
 * (an unknown time is counted in `missing`). Ranks in `order` where given (slowest
 * first), else in the matrix's order.
 */
export function stepHeatmap(m: DistRanksReply["step_matrix"], order?: number[]): Heatmap {
  const rowOf = new Map(m.ranks.map((r, i) => [r, i]));
  const ranks = order ? [...order.filter((r) => rowOf.has(r)), ...m.ranks.filter((r) => !order.includes(r))] : [...m.ranks];
  const cells: [number, number, number][] = [];
  let missing = 0;
  let min = Infinity;
  let max = -Infinity;
  ranks.forEach((rank, y) => {
    const row = m.step_ns[rowOf.get(rank)!] ?? [];
    m.steps.forEach((_, x) => {
      const v = row[x];
      if (v === null || v === undefined || !Number.isFinite(v)) {
        missing++;
        return;
      }
      cells.push([x, y, v]);
      if (v < min) min = v;
      if (v > max) max = v;
    });
  });
  return { ranks, steps: [...m.steps], cells, missing, min: cells.length ? min : 0, max: cells.length ? max : 0 };
}

export interface BytesMatrix {
  ranks: number[];
  /** [to index, from index, bytes] for every pair that moved bytes */
  cells: [number, number, number][];
  max: number;
  total: number;
}

/** The rank × rank bytes matrix as heatmap cells: only pairs with traffic (x: receiver, y: sender). */
export function bytesMatrix(ranks: number[], bytes: (number | null)[][]): BytesMatrix {
  const cells: [number, number, number][] = [];
  let max = 0;
  let total = 0;
  bytes.forEach((row, i) =>
    (row ?? []).forEach((v, j) => {
      if (v && Number.isFinite(v) && v > 0) {
        cells.push([j, i, v]);
        if (v > max) max = v;
        total += v;
      }
    }),
  );
  return { ranks: [...ranks], cells, max, total };
}

/** One line about the clock corrections, or null when no rank was moved. */
export function clockNote(rows: RankRow[]): string | null {
  const moved = rows.filter((r) => r.clock_offset_ns !== null && r.clock_offset_ns !== 0);
  if (!moved.length) return null;
  const methods = new Map<string, number>();
  for (const r of moved) methods.set(r.clock_method ?? "unknown", (methods.get(r.clock_method ?? "unknown") ?? 0) + 1);
  const how = [...methods].map(([m, n]) => `${n} by ${METHOD_WORDS[m] ?? m}`).join(", ");
  const big = moved.reduce((a, b) => (Math.abs(b.clock_offset_ns!) > Math.abs(a.clock_offset_ns!) ? b : a));
  return (
    `Clocks aligned: ${fmtCount(moved.length)} of ${fmtCount(rows.length)} ranks shifted onto one time axis (${how}); ` +
    `largest shift ${fmtDuration(big.clock_offset_ns)} (rank ${big.rank}). Waits and arrival skews are measured after the shift.`
  );
}

export const METHOD_WORDS: Record<string, string> = {
  collectives: "matching collectives across ranks",
  baseTimeNanoseconds: "the traces' baseTimeNanoseconds",
  none: "no correction",
};

/** Which ranks the Distributed view's tables and bars show: every rank, the slowest one
 * (longest step, distributed/ranks' order), the slowest few, or the rank that arrives last
 * at the collectives (the straggler the others wait for: distributed/stragglers' verdict).
 * The slowest step and the latest arrival differ when a rank's step is long because it
 * waits: both are offered. */
export type RankFilter = "all" | "slowest" | "slowest8" | "late";

/** The ranks a filter keeps, or null for every rank. */
export function filterRanks(reply: Pick<DistRanksReply, "ranks" | "order"> | null | undefined, f: RankFilter, lateRank?: number | null): Set<number> | null {
  if (f === "all" || !reply) return null;
  if (f === "late") return lateRank == null ? null : new Set([lateRank]);
  const order = orderRanks(reply).map((r) => r.rank);
  return new Set(order.slice(0, f === "slowest" ? 1 : 8));
}
