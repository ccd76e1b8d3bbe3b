// The "Collective instances" section (distributed/instances, distributed/matrix): each
// collective across the ranks, a page at a time, sorted by the server (arrival skew,
// duration or bytes, largest first): who arrived first and last, the skew, the slowest
// rank, duration, bytes, bandwidths; then the rank × rank bytes of point-to-point
// traffic as a heatmap, or the server's note when there is none.

import { useEffect, useMemo, useState } from "react";
import { useApi } from "../../api/hooks";
import type { DistInstancesReply, DistMatrixReply, InstanceRow } from "../../api/types/distributed";
import { Chart } from "../../components/Chart";
import { DataTable, type Col } from "../../components/DataTable";
import { Empty, Loaded, Notes, Select } from "../../components/common";
import { fmtBytes, fmtCount } from "../../util/format";
import { bytesMatrixOption } from "./charts";
import { bytesMatrix, fitCount } from "./data";

/** A bandwidth in GB/s with three significant digits ("–" when unknown). */
export function fmtGBps(v: number | null | undefined): string {
  return v === null || v === undefined || !Number.isFinite(v) ? "–" : v.toLocaleString("en-US", { maximumSignificantDigits: 3 });
}

/** The server's sort keys by the column that shows them. */
export const SORT_OF: Record<string, string> = { skew_ns: "skew", mean_duration_ns: "duration", bytes: "bytes" };

export function instanceCols(rows: InstanceRow[]): Col<InstanceRow>[] {
  const has = (k: string) => rows.some((r) => r[k] !== undefined);
  const bw = (id: keyof InstanceRow & string, header: string, title: string): Col<InstanceRow> => ({
    id, header, value: (r) => r[id] as number | null, kind: "num", render: (r) => fmtGBps(r[id] as number | null), title,
  });
  const cols: Col<InstanceRow>[] = [
    { id: "name", header: "Collective", value: (r) => r.name, width: 160 },
    { id: "pg_name", header: "Process group", value: (r) => r.pg_name },
    { id: "seq", header: "Seq / call", value: (r) => r.seq ?? r.occurrence ?? null, kind: "count", title: "The collective's Seq in its process group, else its call number (matched by order)" },
    { id: "ranks", header: "Ranks", value: (r) => r.ranks, kind: "count", title: "Ranks that issued this instance" },
    { id: "first_arrival_ns", header: "First arrival", value: (r) => r.first_arrival_ns, kind: "us", title: "When the first rank entered the collective: from the earliest arrival of the run, every rank's clock aligned (the time axis of the Trace view's Ranks mode)" },
    { id: "last_arrival_ns", header: "Last arrival", value: (r) => r.last_arrival_ns, kind: "us", title: "When the last rank entered it" },
    { id: "skew_ns", header: "Arrival skew", value: (r) => r.skew_ns, kind: "us", title: "Last arrival − first arrival: how long the first rank waited for the last" },
    { id: "slowest_rank", header: "Slowest rank", value: (r) => r.slowest_rank, kind: "count", title: "The last rank to arrive" },
    { id: "mean_duration_ns", header: "Mean duration", value: (r) => r.mean_duration_ns, kind: "us", title: "Mean over the ranks of the call's duration" },
  ];
  if (has("wait_ns")) cols.push({ id: "wait_ns", header: "Waiting", value: (r) => r.wait_ns ?? null, kind: "us", title: "Time the ranks spent waiting for the last one" });
  if (has("transfer_ns")) cols.push({ id: "transfer_ns", header: "Transfer", value: (r) => r.transfer_ns ?? null, kind: "us", title: "Time the ranks spent transferring" });
  cols.push(
    { id: "bytes", header: "Data", value: (r) => r.bytes, kind: "bytes", title: "Message size (the largest of the ranks')" },
    bw("algbw_min_gbps", "algbw min (GB/s)", "Algorithm bandwidth, the slowest rank's"),
    bw("algbw_median_gbps", "algbw median (GB/s)", "Algorithm bandwidth, the ranks' median"),
    bw("busbw_min_gbps", "busbw min (GB/s)", "Bus bandwidth, the slowest rank's"),
    bw("busbw_median_gbps", "busbw median (GB/s)", "Bus bandwidth, the ranks' median"),
  );
  return cols;
}

const PAGE_SIZES = [50, 100, 500, 1000];

function Pager({ offset, limit, total, onOffset }: { offset: number; limit: number; total: number; onOffset: (o: number) => void }) {
  const last = Math.max(0, Math.floor((total - 1) / limit) * limit);
  return (
    <span className="pager server-pager">
      <button type="button" className="small" aria-label="First page" disabled={offset <= 0} onClick={() => onOffset(0)}>«</button>
      <button type="button" className="small" aria-label="Previous page" disabled={offset <= 0} onClick={() => onOffset(Math.max(0, offset - limit))}>‹</button>
      <span className="page-range">
        {total ? `${fmtCount(offset + 1)}–${fmtCount(Math.min(total, offset + limit))} of ${fmtCount(total)}` : "0 of 0"}
      </span>
      <button type="button" className="small" aria-label="Next page" disabled={offset + limit >= total} onClick={() => onOffset(offset + limit)}>›</button>
      <button type="button" className="small" aria-label="Last page" disabled={offset >= last} onClick={() => onOffset(last)}>»</button>
    </span>
  );
}

export function InstancesTable({ run, span }: { run: string; span?: string }) {
  const [sort, setSortRaw] = useState("skew");
  const [limit, setLimitRaw] = useState(100);
  const [offset, setOffset] = useState(0);
  useEffect(() => setOffset(0), [run, span]);
  // a new order or page size starts at the first page
  const setSort = (s: string) => {
    setSortRaw(s);
    setOffset(0);
  };
  const setLimit = (n: number) => {
    setLimitRaw(n);
    setOffset(0);
  };
  const inst = useApi<DistInstancesReply>("distributed/instances", { run, span, sort, limit, offset }, { keepStale: true });
  const rows = inst.data?.rows ?? [];
  const cols = useMemo(() => instanceCols(rows), [rows]);
  const sortCol = Object.keys(SORT_OF).find((k) => SORT_OF[k] === sort) ?? "skew_ns";
  const total = inst.data?.total ?? 0;
  return (
    <Loaded state={inst}>
      {(d) => (
        <div className="instances" data-sort={sort} data-offset={offset} data-limit={limit} data-total={d.total}>
          {/* the notes of the cross-rank analysis are the Ranks section's (one analysis answers every distributed route) */}
          <DataTable
            key={`${sort}/${offset}/${limit}`}
            rows={d.rows}
            cols={cols}
            pageSize={limit}
            serverSort={{ id: sortCol, desc: true, ids: Object.keys(SORT_OF), onChange: (id) => setSort(SORT_OF[id]) }}
            exportName={[run, "collective-instances", sort, String(offset)]}
            filterPlaceholder="Filter collectives…"
            emptyText="No collectives."
            caption={`Collective instances across the ranks, by ${sort === "skew" ? "arrival skew" : sort}, largest first`}
            toolbar={
              <>
                <Select label="Sort by" value={sort} onChange={setSort} options={[{ value: "skew", label: "Arrival skew" }, { value: "duration", label: "Duration" }, { value: "bytes", label: "Bytes" }]} />
                <Select label="Page" value={String(limit)} onChange={(v) => setLimit(Number(v))} options={PAGE_SIZES.map((n) => ({ value: String(n), label: `${n} rows` }))} />
                <Pager offset={offset} limit={limit} total={total} onOffset={setOffset} />
                {inst.loading && <span className="spinner small" aria-label="Loading" />}
              </>
            }
          />
        </div>
      )}
    </Loaded>
  );
}

export function BytesMatrixChart({ d, dark }: { d: DistMatrixReply; dark: boolean }) {
  const m = useMemo(() => bytesMatrix(d.ranks, d.bytes), [d]);
  const shown = fitCount(m.ranks.length, 480, 16);
  const height = shown * 16 + 150;
  const option = useMemo(() => bytesMatrixOption(m, shown, dark), [m, shown, dark]);
  if (!m.cells.length) {
    return (
      <div className="matrix-empty">
        {d.notes?.length ? <Notes notes={d.notes} /> : <Empty title="No point-to-point traffic">No send/recv between ranks was found in the traces.</Empty>}
      </div>
    );
  }
  return (
    <div className="bytes-matrix" data-ranks={m.ranks.join(",")} data-cells={m.cells.length} data-shown={shown}>
      <Notes notes={d.notes} />
      <div className="muted">
        Point-to-point bytes from each rank (rows) to each rank (columns): {fmtCount(m.cells.length)} pairs, {fmtBytes(m.total)} in all
        {shown < m.ranks.length ? `; ${fmtCount(shown)} ranks per axis in view, the sliders move and widen it` : ""}.
      </div>
      <div style={{ maxWidth: height + 160 }}>
        <Chart option={option} dark={dark} height={height} ariaLabel="Point-to-point bytes between ranks" />
      </div>
    </div>
  );
}

export function MatrixSection({ run, span, dark }: { run: string; span?: string; dark: boolean }) {
  const mat = useApi<DistMatrixReply>("distributed/matrix", { run, span });
  return <Loaded state={mat}>{(d) => <BytesMatrixChart d={d} dark={dark} />}</Loaded>;
}
