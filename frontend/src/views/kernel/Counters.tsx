// Kernel view, "Device counters": each hardware counter's time-weighted average over each
// kernel's calls, from the kernel_counters route (docs/api.md; Kineto's hardware_counters
// and mtia_counters). Shown only when the trace records device counters.

import { useMemo } from "react";
import { useApi } from "../../api/hooks";
import type { Params } from "../../api/client";
import { DataTable, type Col } from "../../components/DataTable";
import { Loaded, Notes, Section } from "../../components/common";

export interface CounterSeriesInfo {
  track: string;
  counter: string;
  category: string;
  device: number | null;
  samples: number;
}

export interface KernelCounterRow {
  name: string;
  counter: string;
  track: string;
  calls: number;
  covered_ns: number;
  avg: number | null;
}

export interface KernelCountersReply {
  counters: CounterSeriesInfo[];
  rows: KernelCounterRow[];
  rows_total: number;
  truncated: boolean;
  notes: string[];
}

export function counterColumns(): Col<KernelCounterRow>[] {
  return [
    { id: "name", header: "Kernel", value: (r) => r.name, width: 260 },
    { id: "counter", header: "Counter", value: (r) => r.counter, width: 180 },
    { id: "avg", header: "Average", value: (r) => r.avg, kind: "num", title: "Time-weighted mean of the counter over the kernel's calls" },
    { id: "calls", header: "Calls", value: (r) => r.calls, kind: "count" },
    { id: "covered", header: "Covered", value: (r) => r.covered_ns, kind: "us", title: "Kernel time the counter's samples cover" },
    { id: "track", header: "Track", value: (r) => r.track, nowrap: true },
  ];
}

/** The section, only for traces that record device counters. */
export function CountersSection({ sel }: { sel: Params }) {
  const state = useApi<KernelCountersReply>("kernel_counters", sel);
  const cols = useMemo(() => counterColumns(), []);
  const d = state.data;
  if (!state.error && (!d || !d.counters.length)) return null;
  return (
    <Section title="Device counters">
      <Loaded state={state}>
        {(c) => (
          <>
            <Notes notes={c.notes} />
            <DataTable
              rows={c.rows}
              cols={cols}
              exportName={[String(sel.run ?? ""), String(sel.worker ?? ""), "span" + (sel.span ?? ""), "kernel_counters"]}
              initialSort={{ id: "name", desc: false }}
              filterPlaceholder="Filter kernels or counters…"
            />
            <div className="muted small-note">
              {c.counters.length} counter{c.counters.length === 1 ? "" : "s"}: {c.counters.map((s) => s.counter).join(", ")}.
              {c.truncated ? ` First ${c.rows.length} of ${c.rows_total} rows.` : ""}
            </div>
          </>
        )}
      </Loaded>
    </Section>
  );
}
