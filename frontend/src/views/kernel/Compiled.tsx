// Kernel view, "Compiled kernels": the kernels torch.compile (Inductor) generated, from the
// compiled_kernels route (docs/api.md): backend, launch config, calls, device time, FLOPs,
// bytes and rates; the generated file opens in VS Code as a stack frame does (FrameItem,
// util/vscode), and where Inductor's provenance artifacts were found, the graph nodes a
// kernel fused and the user's source lines. On a trace without Triton kernels (a CPU
// compile: C++ kernels) it says so, with the compiled regions the trace holds.

import { useMemo } from "react";
import { useApi } from "../../api/hooks";
import type { Params } from "../../api/client";
import { DataTable, type Col } from "../../components/DataTable";
import { Loaded, Notes, Section } from "../../components/common";
import { FrameItem } from "../../components/StackFrames";
import type { SourceFrame } from "../../api/types/frames";
import { fmtNumber } from "../../util/format";

export interface CompiledProvenance {
  post_grad_nodes: string[];
  pre_grad_nodes: string[];
  frames: SourceFrame[];
}

export interface CompiledRow {
  name: string;
  kernel_backend: string | null;
  kernel_file: string | null;
  kernel_path: string | null;
  kernel_hash: string | null;
  kernel_kwargs: string | null;
  kernel_name: string | null;
  num_warps: number | null;
  num_stages: number | null;
  calls: number;
  device_ns: number | null;
  flops: number | null;
  bytes: number | null;
  tflops: number | null;
  tbps: number | null;
  device_kernels: number;
  provenance: CompiledProvenance | null;
}

export interface CompiledReply {
  rows: CompiledRow[];
  total: number;
  regions: { regions: number; compiled_functions: number; ops: { name: string; calls: number; host_ns: number }[]; ops_total: number };
  provenance_files: string[];
  notes: string[];
}

/** The generated file as a stack frame at line 1: opened in VS Code, copied elsewhere. */
function KernelFile({ row }: { row: CompiledRow }) {
  if (!row.kernel_file) return <span className="muted">–</span>;
  const frame: SourceFrame = { file: row.kernel_file, line: 1, func: null, path: row.kernel_path };
  return (
    <ol className="frames compiled-file" aria-label="Generated kernel file" style={{ listStyle: "none", paddingLeft: 0 }}>
      <FrameItem frame={frame} />
    </ol>
  );
}

function Provenance({ p }: { p: CompiledProvenance | null }) {
  if (!p) return <span className="muted">–</span>;
  const fused = p.post_grad_nodes.join(", ");
  return (
    <div className="compiled-provenance">
      {fused && <div title={p.pre_grad_nodes.length ? `From: ${p.pre_grad_nodes.join(", ")}` : undefined}>{fused}</div>}
      {p.frames.length > 0 && (
        <ol className="frames" aria-label="Source lines">
          {p.frames.map((f, i) => <FrameItem key={i} frame={f} />)}
        </ol>
      )}
    </div>
  );
}

function launchConfig(r: CompiledRow): string {
  const parts = [r.num_warps != null ? `warps=${r.num_warps}` : "", r.num_stages != null ? `stages=${r.num_stages}` : "", r.kernel_kwargs ?? ""];
  return parts.filter(Boolean).join(", ");
}

export function compiledColumns(withProvenance: boolean): Col<CompiledRow>[] {
  const c: Col<CompiledRow>[] = [
    { id: "name", header: "Kernel", value: (r) => r.name, width: 220 },
    { id: "backend", header: "Backend", value: (r) => r.kernel_backend ?? "", nowrap: true },
    { id: "config", header: "Launch config", value: launchConfig, title: "num_warps, num_stages and the config's kwargs (XBLOCK, ...)" },
    { id: "calls", header: "Calls", value: (r) => r.calls, kind: "count" },
    { id: "device", header: "Device time", value: (r) => r.device_ns, kind: "us" },
    { id: "flops", header: "FLOPs", value: (r) => r.flops, kind: "num", title: "kernel_flop per call × calls (Inductor's estimate)" },
    { id: "bytes", header: "Bytes", value: (r) => r.bytes, kind: "bytes", title: "kernel_num_gb × 1e9 per call × calls" },
    { id: "tflops", header: "TFLOP/s", value: (r) => r.tflops, kind: "num" },
    { id: "tbps", header: "TB/s", value: (r) => r.tbps, kind: "num" },
    { id: "file", header: "Kernel file", value: (r) => r.kernel_file ?? "", render: (r) => <KernelFile row={r} />, width: 240 },
  ];
  if (withProvenance) {
    c.push({
      id: "prov", header: "Fused ops and source",
      value: (r) => (r.provenance ? [...r.provenance.post_grad_nodes, ...r.provenance.frames.map((f) => `${f.file}:${f.line}`)].join(" ") : ""),
      render: (r) => <Provenance p={r.provenance} />, width: 220,
    });
  }
  return c;
}

function Regions({ d }: { d: CompiledReply }) {
  const r = d.regions;
  if (!r.regions) return null;
  const ops = r.ops.slice(0, 10).map((o) => `${o.name} ×${fmtNumber(o.calls)}`).join(", ");
  return (
    <div className="muted compiled-regions">
      {r.regions} Torch-Compiled Region range{r.regions === 1 ? "" : "s"}, {r.compiled_functions} CompiledFunction call{r.compiled_functions === 1 ? "" : "s"}
      {ops && <>; operators under them: {ops}{r.ops_total > 10 ? ` and ${r.ops_total - 10} more` : ""}</>}.
    </div>
  );
}

/** The section, only for traces that hold compiled kernels or compiled regions. */
export function CompiledSection({ sel }: { sel: Params }) {
  const state = useApi<CompiledReply>("compiled_kernels", sel);
  const withProv = useMemo(() => !!state.data?.rows.some((r) => r.provenance), [state.data]);
  const cols = useMemo(() => compiledColumns(withProv), [withProv]);
  const d = state.data;
  if (!state.error && d && !d.total && !d.regions.regions) return null;
  return (
    <Section title="Compiled kernels">
      <Loaded state={state}>
        {(c) => (
          <>
            {!c.rows.length && <div className="empty-title">No Triton kernels in this trace.</div>}
            <Regions d={c} />
            <Notes notes={c.notes} />
            {c.rows.length > 0 && (
              <DataTable
                rows={c.rows}
                cols={cols}
                exportName={[String(sel.run ?? ""), String(sel.worker ?? ""), "span" + (sel.span ?? ""), "compiled_kernels"]}
                initialSort={{ id: "device", desc: true }}
                filterPlaceholder="Filter compiled kernels…"
              />
            )}
            {c.provenance_files.length > 0 && <div className="muted small-note">Provenance from {c.provenance_files.join(", ")}.</div>}
          </>
        )}
      </Loaded>
    </Section>
  );
}
