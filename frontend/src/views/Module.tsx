// Module: the nn.Module (or Lightning) hierarchy as a tree table with host and device
// time, and as a flame graph: the whole trace aggregated (every module once, its calls
// added up), or one step's module calls as they ran.

import { useMemo } from "react";
import type { ViewProps } from "./props";
import { useApi } from "../api/hooks";
import type { ModuleReply, ModuleRow, TreeNode, TreeReply } from "../api/types/module";
import type { OverviewReply } from "../api/types/overview";
import { DataTable, type Col } from "../components/DataTable";
import { Empty, Loaded, Notes, Section, Select } from "../components/common";
import { setState } from "../state/store";
import { FlameGraph, type FlameNode } from "../timeline/FlameGraph";
import { fmtDuration } from "../util/format";

export interface ModuleTreeRow extends ModuleRow {
  children: ModuleTreeRow[];
}

/** Nests rows by parent_id (parents may come in any order; orphans become roots). */
export function nestModules(rows: ModuleRow[]): ModuleTreeRow[] {
  const byId = new Map<number, ModuleTreeRow>();
  for (const r of rows) byId.set(r.node_id, { ...r, children: [] });
  const roots: ModuleTreeRow[] = [];
  for (const r of rows) {
    const n = byId.get(r.node_id)!;
    const p = r.parent_id >= 0 ? byId.get(r.parent_id) : undefined;
    if (p && p !== n) p.children.push(n);
    else roots.push(n);
  }
  return roots;
}

const cols: Col<ModuleTreeRow>[] = [
  { id: "name", header: "Module", value: (r) => r.name, width: 240 },
  { id: "type", header: "Type", value: (r) => r.module_type },
  { id: "calls", header: "Calls", value: (r) => r.calls, kind: "count" },
  { id: "ops", header: "Operators", value: (r) => r.operators, kind: "count" },
  { id: "htotal", header: "Host total", value: (r) => r.host_total_ns, kind: "us" },
  { id: "hself", header: "Host self", value: (r) => r.host_self_ns, kind: "us" },
  { id: "dtotal", header: "Device total", value: (r) => r.device_total_ns, kind: "us" },
  { id: "dself", header: "Device self", value: (r) => r.device_self_ns, kind: "us" },
];

function toFlame(n: TreeNode): FlameNode {
  return {
    id: n.node_id,
    name: n.name,
    start_ns: n.start_ns,
    end_ns: n.end_ns,
    detail: `${n.calls} call${n.calls === 1 ? "" : "s"} · ${n.path}`,
    children: (n.children ?? []).map(toFlame),
  };
}

/** One module call of the tree route's `calls` (times relative to the trace's origin). */
interface ModuleCall {
  node_id: number;
  name: string;
  module_type: string;
  start_ns: number;
  end_ns: number;
  host_self_ns: number;
  device_total_ns: number;
  children?: ModuleCall[];
}

function callToFlame(c: ModuleCall, key: string): FlameNode {
  return {
    id: key, // a module runs many times: the node id is not unique among calls
    name: c.name,
    start_ns: c.start_ns,
    end_ns: c.end_ns,
    detail: `${c.module_type} · self ${fmtDuration(c.host_self_ns)}${c.device_total_ns ? ` · device ${fmtDuration(c.device_total_ns)}` : ""}`,
    children: (c.children ?? []).map((k, i) => callToFlame(k, `${key}.${i}`)),
  };
}

export function ModuleView({ st, sel, dark }: ViewProps) {
  const mod = useApi<ModuleReply>("module", sel);
  const overview = useApi<OverviewReply>("overview", sel);
  const step = st.step && /^-?\d+$/.test(st.step) ? st.step : undefined;
  const tree = useApi<TreeReply>("tree", { ...sel, step }, { keepStale: true });
  const nested = useMemo(() => nestModules(mod.data?.rows ?? []), [mod.data]);
  // the tree route answers both: `nodes` (aggregated, the same for every step) and
  // `calls` (of the step asked for): a chosen step draws its calls, else the aggregate
  const flame = useMemo(
    () => (step !== undefined
      ? ((tree.data?.calls ?? []) as ModuleCall[]).map((c, i) => callToFlame(c, String(i)))
      : (tree.data?.nodes ?? []).map(toFlame)),
    [tree.data, step],
  );
  const steps = overview.data?.steps ?? [];

  return (
    <Loaded state={mod}>
      {(m) =>
        !m.rows.length ? (
          <Empty title="No module hierarchy">
            {m.notes?.[0] ?? "This trace records no nn.Module calls. Recent PyTorch records them with with_stack=True (or with_modules=True)."}
          </Empty>
        ) : (
          <div className="view">
            <Notes notes={m.notes} />
            <Section
              title={`Flame graph${m.source ? ` (${m.source})` : ""}`}
              actions={
                <Select
                  label="Step"
                  value={step ?? ""}
                  options={[{ value: "", label: "Whole trace" }, ...steps.map((s) => ({ value: String(s.step), label: s.name }))]}
                  onChange={(v) => setState({ step: v || undefined })}
                />
              }
            >
              <Loaded state={tree}>
                {(t) => (
                  <>
                    <Notes notes={t.notes} />
                    <div className="muted small-note">
                      {step !== undefined
                        ? `The module calls of ${steps.find((x) => String(x.step) === step)?.name ?? `step ${step}`} as they ran (left to right: time).`
                        : "Every module once, its calls added up (width: total host time)."}
                    </div>
                    <FlameGraph nodes={flame} dark={dark} />
                  </>
                )}
              </Loaded>
            </Section>
            <Section title="Modules">
              <DataTable
                rows={nested}
                cols={cols}
                getSubRows={(r) => (r.children.length ? r.children : undefined)}
                exportName={[sel.run, "modules"]}
                filterPlaceholder="Filter modules…"
                rowKey={(r) => String(r.node_id)}
                expandAll={m.rows.length <= 200}
              />
              <div className="muted small-note">Times in µs; self = minus child modules.</div>
            </Section>
          </div>
        )
      }
    </Loaded>
  );
}
