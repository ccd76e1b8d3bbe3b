// Kernel view, "CUDA graphs": the graph replays of a trace, from the graphs route
// (docs/api.md): per graph id its replays, kernels and device time, and, where torch's graph
// annotations name what each node ran, the device time per annotation of the captured
// code. Without annotations the route's note says the replay cannot be attributed to
// operators. Shown only when the trace has graph kernels.

import { useApi } from "../../api/hooks";
import type { Params } from "../../api/client";
import { DataTable, type Col } from "../../components/DataTable";
import { Loaded, Notes, Section } from "../../components/common";

export interface GraphRow {
  graph_id: number;
  replays: number;
  kernels: number;
  device_ns: number;
  share: number;
}

export interface GraphAttributionRow {
  annotation: string;
  graphs: number;
  kernels: number;
  device_ns: number;
  share: number;
}

export interface GraphsReply {
  graphs: GraphRow[];
  graphs_total: number;
  attribution: GraphAttributionRow[];
  attribution_total: number;
  kernels: number;
  device_ns: number;
  share: number;
  annotated: number;
  annotations: { file: string | null; from_args: number };
  device_word: string;
  notes: string[];
}

export function graphColumns(word: string): Col<GraphRow>[] {
  return [
    { id: "graph", header: "Graph id", value: (r) => (r.graph_id < 0 ? "unknown" : String(r.graph_id)), nowrap: true, title: "-1: launched by a graph launch, without a graph id in the trace" },
    { id: "replays", header: "Replays", value: (r) => r.replays, kind: "count", title: "Graph launches (cudaGraphLaunch / hipGraphLaunch) that ran it" },
    { id: "kernels", header: "Kernels", value: (r) => r.kernels, kind: "count", title: "Its kernels, copies and fills over all replays" },
    { id: "device", header: "Device time", value: (r) => r.device_ns, kind: "us" },
    { id: "share", header: `Share of ${word} time`, value: (r) => r.share * 100, kind: "pct" },
  ];
}

export function attributionColumns(word: string): Col<GraphAttributionRow>[] {
  return [
    { id: "annotation", header: "Captured code (annotation)", value: (r) => r.annotation, width: 260 },
    { id: "graphs", header: "Graphs", value: (r) => r.graphs, kind: "count" },
    { id: "kernels", header: "Kernels", value: (r) => r.kernels, kind: "count" },
    { id: "device", header: "Device time", value: (r) => r.device_ns, kind: "us" },
    { id: "share", header: `Share of ${word} time`, value: (r) => r.share * 100, kind: "pct" },
  ];
}

/** The section, only for traces that hold graph kernels. */
export function GraphsSection({ sel }: { sel: Params }) {
  const state = useApi<GraphsReply>("graphs", sel);
  const d = state.data;
  if (!state.error && (!d || !d.kernels)) return null;
  const exportBase = [String(sel.run ?? ""), String(sel.worker ?? ""), "span" + (sel.span ?? "")];
  return (
    <Section title="CUDA graphs">
      <Loaded state={state}>
        {(g) => (
          <>
            <Notes notes={g.notes} />
            <DataTable rows={g.graphs} cols={graphColumns(g.device_word)} exportName={[...exportBase, "graphs"]}
              initialSort={{ id: "device", desc: true }} filterPlaceholder="Filter graphs…" />
            {g.attribution.length > 0 && (
              <DataTable rows={g.attribution} cols={attributionColumns(g.device_word)} exportName={[...exportBase, "graph_attribution"]}
                initialSort={{ id: "device", desc: true }} filterPlaceholder="Filter annotations…" />
            )}
            {g.annotations.file && <div className="muted small-note">Annotations from {g.annotations.file}.</div>}
          </>
        )}
      </Loaded>
    </Section>
  );
}
