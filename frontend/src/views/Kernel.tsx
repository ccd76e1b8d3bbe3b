// Kernel: device time by kernel (pie), share on tensor cores (pie), and the kernel
// table by name or by name + launching operator + launch configuration.

import { useMemo } from "react";
import type { ViewProps } from "./props";
import { useApi } from "../api/hooks";
import type { KernelPieReply, KernelRow, KernelTableReply, TcPieReply } from "../api/types/kernel";
import type { OverviewReply } from "../api/types/overview";
import { DataTable, type Col } from "../components/DataTable";
import { Empty, Loaded, Notes, Section, Select } from "../components/common";
import { setState } from "../state/store";
import { fmtDuration, fmtPct } from "../util/format";
import { Pie } from "./Operator";
import { acceleratorWord } from "./Overview";
import { LaunchesSection } from "./why/Launches";
import { QueueSection } from "./why/Queue";
import { CompiledSection } from "./kernel/Compiled";
import { GraphsSection } from "./kernel/Graphs";
import { CountersSection } from "./kernel/Counters";
import { kernelFieldColumns } from "./kernel/fields";
import { openEvent } from "./trace/open";

// grouped by kernel name by default (the old plugin's default): the costliest kernel is the
// first row, not split across the operators and launch configs that ran it
const KGROUPS = [
  { value: "Kernel", label: "Kernel" },
  { value: "KernelNameAndOp", label: "Kernel + operator + launch config" },
];

export function KernelView({ st, sel, dark }: ViewProps) {
  const group = st.kgroup === "KernelNameAndOp" ? "KernelNameAndOp" : "Kernel";
  const top = st.top ?? "10";
  const pie = useApi<KernelPieReply>("kernel", { ...sel, top });
  const tc = useApi<TcPieReply>("kernel/tc_pie", sel);
  const table = useApi<KernelTableReply>("kernel/table", { ...sel, group_by: group });
  const dw = acceleratorWord(useApi<OverviewReply>("overview", sel).data);

  // null on a backend whose kernel names do not tell (MTIA, XPU, ...): no such column then
  const unit = table.data?.matrix_unit ? table.data.matrix_unit.toLowerCase() : null;
  const cols = useMemo(() => {
    // the name and the times first: at 1400 px the time columns are seen without scrolling
    // sideways; the launch details (operator, grid, block...) follow
    const c: Col<KernelRow>[] = [
      { id: "name", header: "Kernel", value: (r) => r.name, width: 260 },
      { id: "total", header: "Total", value: (r) => r.total_ns, kind: "us" },
      { id: "calls", header: "Calls", value: (r) => r.calls, kind: "count" },
      { id: "mean", header: "Mean", value: (r) => r.mean_ns, kind: "us" },
      { id: "max", header: "Max", value: (r) => r.max_ns, kind: "us" },
      { id: "min", header: "Min", value: (r) => r.min_ns, kind: "us" },
    ];
    if (group === "KernelNameAndOp") {
      c.push(
        { id: "op", header: "Operator", value: (r) => r.op ?? "", width: 160 },
        { id: "grid", header: "Grid", value: (r) => r.grid ?? "", noFilter: true, nowrap: true },
        { id: "block", header: "Block", value: (r) => r.block ?? "", noFilter: true, nowrap: true },
        { id: "regs", header: "Registers / thread", value: (r) => r.registers ?? null, kind: "count" },
        { id: "smem", header: "Shared memory", value: (r) => r.shared_memory ?? null, kind: "bytes" },
      );
    }
    if (unit) {
      c.push({ id: "tc", header: `Uses ${unit}`, value: (r) => r.tensor_cores, kind: "bool" });
      if (group === "KernelNameAndOp") c.push({ id: "optc", header: `Op eligible for ${unit}`, value: (r) => r.op_tc_eligible ?? null, kind: "bool" });
    }
    c.push(
      { id: "graph", header: "From graphs", value: (r) => r.graph_calls ?? null, kind: "count", title: "Calls launched by a graph launch (cudaGraphLaunch / hipGraphLaunch)" },
      { id: "bps", header: "Mean blocks per SM", value: (r) => r.blocks_per_sm, kind: "num" },
      { id: "occ", header: "Mean est. achieved occupancy", value: (r) => r.occupancy, kind: "pct" },
    );
    c.push(...kernelFieldColumns(table.data?.rows)); // occupancy limits, priority, channel: where the trace has them
    return c;
  }, [group, unit, table.data]);

  return (
    <div className="view">
      <div className="controls">
        <Select label="Group by" value={group} options={KGROUPS} onChange={(v) => setState({ kgroup: v })} />
        <Select label="Top" value={top} options={["5", "10", "20", "50"]} onChange={(v) => setState({ top: v }, true)} />
      </div>
      <Section title="Device time">
        <Loaded state={pie}>
          {(p) =>
            p.rows.length ? (
              <div className="grid-2x2">
                <Pie title={`Kernels (total ${fmtDuration(p.total_ns)})`} slices={p.rows} dark={dark} />
                <Loaded state={tc}>
                  {(t) =>
                    t.unit ? (
                      <Pie title={`${t.unit} (${fmtPct(t.using_tc_pct)} of kernel time)`} slices={t.rows} dark={dark} empty="No kernel time." />
                    ) : (
                      <div className="muted">Whether kernels use the device's matrix units is not known for this backend (its kernel names do not say).</div>
                    )
                  }
                </Loaded>
              </div>
            ) : (
              <Empty title="No kernels">{p.notes?.[0] ?? "This trace has no device kernels — was ProfilerActivity.CUDA (or your device's activity) enabled?"}</Empty>
            )
          }
        </Loaded>
      </Section>
      <Section title="Kernels">
        <Loaded state={table}>
          {(t) =>
            t.rows.length ? (
              <>
                <Notes notes={t.notes} />
                <DataTable
                  rows={t.rows}
                  cols={cols}
                  exportName={[sel.run, sel.worker, "span" + (sel.span ?? ""), "kernels", group]}
                  initialSort={{ id: "total", desc: true }}
                  // its longest call, selected in the Trace view: the operator that launched it and
                  // that operator's stack are one click from there
                  onRowClick={(r) => { if (r.longest_event != null) void openEvent(sel, r.longest_event); }}
                  filter={st.q ?? ""}
                  onFilterChange={(v) => setState({ q: v }, true)}
                  filterPlaceholder="Filter kernels or operators…"
                />
                <div className="muted small-note">Click a kernel to open its longest call in the Trace view. Times in µs. Blocks per SM and occupancy are duration-weighted means; “–” where the trace has no launch data.</div>
              </>
            ) : (
              <Empty title="No kernels">{t.notes?.[0] ?? "This trace has no device kernels — was ProfilerActivity.CUDA enabled?"}</Empty>
            )
          }
        </Loaded>
      </Section>
      <CompiledSection sel={sel} />
      <GraphsSection sel={sel} />
      <CountersSection sel={sel} />
      <Section title="Launches">
        <LaunchesSection sel={sel} dark={dark} />
      </Section>
      <Section title="Launch queue">
        <QueueSection sel={sel} deviceWord={dw} />
      </Section>
    </div>
  );
}
