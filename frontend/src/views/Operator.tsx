// Operator: where host and device time goes by operator — four pies (host/device,
// self/total) and a table grouped by operator or operator + input shape, each row
// expanding to its distinct Python call stacks (frames link to the source in VS Code).

import { useMemo } from "react";
import type { ViewProps } from "./props";
import { useApi } from "../api/hooks";
import type { Frame } from "../api/types/frames";
import type { OperationPieReply, OperatorRow, OperatorStackReply, StackRow } from "../api/types/operator";
import type { PieSlice } from "../api/types/pie";
import { ApiError } from "../api/client";
import { Chart } from "../components/Chart";
import { Name } from "../components/Name";
import { pieChartOption, pieHeight } from "../components/pie";
import { DataTable, type Col } from "../components/DataTable";
import { Empty, Loaded, Notes, Section, Select } from "../components/common";
import { StackFrames, stackFromLine } from "../components/StackFrames";
import { setState } from "../state/store";
import { fmtDuration } from "../util/format";
import { foldedFrame, shortFile } from "../util/frames";
import { CompiledSection } from "./kernel/Compiled";
import { RooflineSection } from "./why/Roofline";

export const GROUPS = [
  { value: "Operation", label: "Operator" },
  { value: "OperationAndInputShape", label: "Operator + input shape" },
  { value: "OperationAndStack", label: "Operator + call stack" },
];

type OpRow = OperatorRow & { stack_id?: number; stack_from?: string | null; frames?: Frame[] };

/** The innermost frame of the user's own code (util/frames: foldedFrame), the whole stack on demand. */
function FramesCell({ frames, from }: { frames: Frame[] | undefined; from?: string | null }) {
  if (!frames || !frames.length) return <span className="muted">no stack</span>;
  const first = foldedFrame(frames) ?? frames[0];
  return (
    <details className="frames-cell">
      <summary>
        <Name text={first.func ?? ""} /> <span className="muted mono"><Name text={first.file ? `${shortFile(first.file)}:${first.line ?? ""}` : ""} /></span>
        {frames.length > 1 ? <span className="muted"> (+{frames.length - 1})</span> : null}
        {from ? <span className="muted" title={stackFromLine(from)}> · <Name text={from} /></span> : null}
      </summary>
      <StackFrames frames={frames} from={from} />
    </details>
  );
}

/** A pie of time by name; bars where the slices nest or "Other" is most of it (components/pie). */
export function Pie({ title, slices, dark, empty, nested }: { title: string; slices: PieSlice[]; dark: boolean; empty?: string; nested?: boolean }) {
  const built = useMemo(() => pieChartOption(title, slices, { nested, fmt: (v) => fmtDuration(v) }), [title, slices, nested]);
  const total = slices.reduce((a, s) => a + s.value_ns, 0);
  if (!slices.length || total <= 0) {
    return (
      <div className="pie-empty">
        <div className="pie-title">{title}</div>
        <div className="muted">{empty ?? "No time recorded."}</div>
      </div>
    );
  }
  return (
    <div data-chart-kind={built.kind}>
      <Chart option={built.option} dark={dark} height={pieHeight(built.kind, slices.length)} ariaLabel={title} title={built.title} subtitle={built.subtitle} />
    </div>
  );
}

function Stacks({ sel, group, row, hasDevice }: { sel: ViewProps["sel"]; group: string; row: OperatorRow; hasDevice: boolean }) {
  const state = useApi<OperatorStackReply>("operation/stack", {
    ...sel,
    group_by: group,
    op_name: row.name,
    input_shape: group === "OperationAndInputShape" ? row.input_shape ?? "" : undefined,
  });
  return (
    <Loaded state={state}>
      {(d) => {
        if (!d.rows.length) return <div className="muted">No calls.</div>;
        const cols: Col<StackRow>[] = [
          { id: "frames", header: "Call stack (innermost first)", value: (r) => r.frames.map((f) => `${f.func ?? ""} ${f.file ?? ""}:${f.line ?? ""}`).join(" ← "), render: (r) => <StackFrames frames={r.frames} from={r.stack_from} /> },
          { id: "calls", header: "Calls", value: (r) => r.calls, kind: "count" },
          ...(hasDevice
            ? ([
                { id: "dself", header: "Device self", value: (r: StackRow) => r.device_self_ns, kind: "us" },
                { id: "dtotal", header: "Device total", value: (r: StackRow) => r.device_total_ns, kind: "us" },
              ] as Col<StackRow>[])
            : []),
          { id: "hself", header: "Host self", value: (r) => r.host_self_ns, kind: "us" },
          { id: "htotal", header: "Host total", value: (r) => r.host_total_ns, kind: "us" },
        ];
        return (
          <div className="nested">
            <DataTable
              rows={d.rows}
              cols={cols}
              exportName={[sel.run, row.name, "stacks"]}
              initialSort={{ id: "htotal", desc: true }}
              pageSize={25}
              filterPlaceholder="Filter stacks by file or function…"
              rowKey={(r) => `${r.stack_id}\u0000${r.stack_from ?? ""}`}
            />
          </div>
        );
      }}
    </Loaded>
  );
}

export function OperatorView({ st, sel, dark }: ViewProps) {
  const group = GROUPS.some((g) => g.value === st.group) ? (st.group as string) : "Operation";
  const byStack = group === "OperationAndStack";
  const top = st.top ?? "10";
  // pies by call stack would repeat the operator pies: those are shown instead
  const pies = useApi<OperationPieReply>("operation", { ...sel, group_by: byStack ? "Operation" : group, top });
  const table = useApi<{ group_by: string; has_device: boolean; matrix_unit?: string | null; rows: OpRow[]; notes?: string[] }>("operation/table", { ...sel, group_by: group });

  const cols = useMemo(() => {
    const hasDevice = table.data?.has_device ?? false;
    const c: Col<OpRow>[] = [{ id: "name", header: "Name", value: (r) => r.name, width: 220 }];
    if (group === "OperationAndInputShape") c.push({ id: "shape", header: "Input shape", value: (r) => r.input_shape ?? "", width: 160 });
    if (byStack) {
      c.push({
        id: "stack",
        header: "Call stack",
        value: (r) => (r.frames ?? []).map((f) => `${f.func ?? ""} ${f.file ?? ""}:${f.line ?? ""}`).join(" ← "),
        render: (r) => <FramesCell frames={r.frames} from={r.stack_from} />,
        width: 260,
      });
    }
    c.push({ id: "calls", header: "Calls", value: (r) => r.calls, kind: "count" });
    if (hasDevice) {
      c.push(
        { id: "dself", header: "Device self", value: (r) => r.device_self_ns, kind: "us", title: "Device time of kernels launched by the operator itself (µs)" },
        { id: "dtotal", header: "Device total", value: (r) => r.device_total_ns, kind: "us", title: "Device time of kernels launched by the operator and its children (µs)" },
      );
    }
    c.push(
      { id: "hself", header: "Host self", value: (r) => r.host_self_ns, kind: "us", title: "Host time in the operator minus its children: child operators, runtime calls and Python frames (µs; as torch's Self CPU)" },
      { id: "htotal", header: "Host total", value: (r) => r.host_total_ns, kind: "us", title: "Host time in the operator and its children (µs)" },
    );
    if ((table.data?.rows ?? []).some((r) => (r.python_ns ?? 0) > 0)) {
      c.push({
        id: "python",
        header: "Python",
        value: (r) => r.python_ns ?? 0,
        kind: "us",
        title: "Time in Python code the operator called back into (an autograd.Function's backward, a tensor subclass, a checkpointed forward): part of Host total, not of Host self; the Python frames are rows of trace.table() (µs)",
      });
    }
    const unit = table.data?.matrix_unit ? table.data.matrix_unit.toLowerCase() : null;
    if (hasDevice && unit) {
      c.push(
        { id: "tce", header: `Eligible for ${unit}`, value: (r) => r.tc_eligible, kind: "bool" },
        { id: "tcs", header: `Self on ${unit}`, value: (r) => r.tc_self_pct, kind: "pct" },
        { id: "tct", header: `Total on ${unit}`, value: (r) => r.tc_total_pct, kind: "pct" },
      );
    }
    return c;
  }, [group, byStack, table.data]);

  return (
    <div className="view">
      <div className="controls">
        <Select label="Group by" value={group} options={GROUPS} onChange={(v) => setState({ group: v }, false)} />
        <Select label="Top" value={top} options={["5", "10", "20", "50"]} onChange={(v) => setState({ top: v }, true)} title="Slices in the pies; the rest is 'Other'" />
      </div>
      <Section title="Time by operator">
        <Loaded state={pies}>
          {(p) => (
            <>
              <Notes notes={p.notes} />
              <div className="grid-2x2">
                {p.device_self.length > 0 || p.device_total.length > 0 ? (
                  <>
                    <Pie title="Device self time" slices={p.device_self} dark={dark} />
                    <Pie title="Device total time" slices={p.device_total} dark={dark} nested />
                  </>
                ) : null}
                <Pie title="Host self time" slices={p.host_self} dark={dark} />
                <Pie title="Host total time" slices={p.host_total} dark={dark} nested />
              </div>
              {p.device_self.length === 0 && p.device_total.length === 0 && (
                <div className="muted small-note">No device time: this trace has no device events — was ProfilerActivity.CUDA enabled?</div>
              )}
            </>
          )}
        </Loaded>
      </Section>
      <Section title="Operators">
        {byStack && table.error instanceof ApiError && table.error.status === 400 ? (
          <Empty title="Grouping by call stack is not available">
            This server does not group operators by call stack ({table.error.message}). Group by operator and expand a row (▸) to see its call stacks.
          </Empty>
        ) : (
        <Loaded state={table}>
          {(t) =>
            t.rows.length ? (
              <>
                <Notes notes={t.notes} />
                <DataTable
                  rows={t.rows}
                  cols={cols}
                  exportName={[sel.run, sel.worker, "span" + (sel.span ?? ""), "operators", group]}
                  initialSort={{ id: t.has_device ? "dself" : "hself", desc: true }}
                  filter={st.q ?? ""}
                  onFilterChange={(v) => setState({ q: v }, true)}
                  filterPlaceholder="Filter operators…"
                  renderExpanded={byStack ? undefined : (r) => <Stacks sel={sel} group={group} row={r} hasDevice={t.has_device} />}
                  expandLabel="Show call stacks"
                  rowKey={(r, i) => `${r.name}\u0000${r.input_shape ?? ""}\u0000${r.stack_id ?? ""}\u0000${i}`}
                />
                <div className="muted small-note">
                  {byStack ? "One row per operator and Python call stack; click a stack to unfold it." : "Expand a row (▸) for its Python call stacks."}
                </div>
              </>
            ) : (
              <Empty title="No operators">{t.notes?.[0] ?? "The trace has no CPU operator events (cpu_op)."}</Empty>
            )
          }
        </Loaded>
        )}
      </Section>
      <Section title="Roofline">
        <RooflineSection sel={sel} dark={dark} />
      </Section>
      {/* a trace without device work has no Kernel view: its compiled regions (torch.compile
          on CPU: C++ kernels, no launch ranges) are shown here, with the ops they ran */}
      {table.data && !table.data.has_device && <CompiledSection sel={sel} />}
    </div>
  );
}
