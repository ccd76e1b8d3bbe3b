// The Overview's "Annotations" section (annotations): the user's record_function ranges on
// the host (count, time, the kernels launched inside them and their time, an outer range
// covering its inner ones') and the gpu_user_annotation ranges per device (the device's
// busy time inside them, each ns once). Shown only when the trace has either; ProfilerStep#N
// ranges are left out by the API.

import { useMemo } from "react";
import type { ViewProps } from "../props";
import { useApi } from "../../api/hooks";
import type { AnnotationRow, AnnotationsReply, DeviceAnnotationRow } from "../../api/types/why";
import { DataTable, type Col } from "../../components/DataTable";
import { Loaded, Notes, Section } from "../../components/common";

/** Whether the reply has anything to show (the section is left out otherwise). */
export function hasAnnotations(d: AnnotationsReply | null | undefined): boolean {
  return !!d && (d.host.length > 0 || d.device.length > 0);
}

/** The columns both sides share: the ranges' name, count and time. */
function rangeCols<T extends AnnotationRow>(): Col<T>[] {
  return [
    { id: "name", header: "Annotation", value: (r) => r.name, width: 240 },
    { id: "count", header: "Count", value: (r) => r.count, kind: "count" },
    { id: "total", header: "Total", value: (r) => r.total_ns, kind: "us" },
    { id: "mean", header: "Mean", value: (r) => r.mean_ns, kind: "us" },
    { id: "max", header: "Max", value: (r) => r.max_ns, kind: "us" },
  ];
}

export function hostAnnotationCols(): Col<AnnotationRow>[] {
  return [
    ...rangeCols<AnnotationRow>(),
    { id: "kernels", header: "Kernels", value: (r) => r.kernels, kind: "count", title: "Kernels launched inside the ranges (an outer range counts its inner ones')" },
    { id: "kernel_ns", header: "Kernel time", value: (r) => r.kernel_ns, kind: "us", title: "Time the kernels launched inside the ranges ran" },
  ];
}

export function deviceAnnotationCols(deviceWord: string): Col<DeviceAnnotationRow>[] {
  return [
    { id: "device", header: deviceWord, value: (r) => r.device, kind: "count" },
    ...rangeCols<DeviceAnnotationRow>(),
    { id: "kernels", header: "Kernels", value: (r) => r.kernels, kind: "count", title: "Kernels that ran inside the ranges" },
    { id: "kernel_ns", header: "Busy time", value: (r) => r.kernel_ns, kind: "us", title: `The ${deviceWord.toLowerCase()}'s busy time inside the ranges, each ns once` },
  ];
}

/** The section, card included: nothing at all while loading or without annotations. */
export function AnnotationsSection({ sel, deviceWord }: Pick<ViewProps, "sel"> & { deviceWord: string }) {
  const state = useApi<AnnotationsReply>("annotations", sel);
  const hCols = useMemo(() => hostAnnotationCols(), []);
  const dCols = useMemo(() => deviceAnnotationCols(deviceWord), [deviceWord]);
  const name = (what: string) => [sel.run, sel.worker, "span" + (sel.span ?? ""), what];
  if (!state.error && !hasAnnotations(state.data)) return null;
  return (
    <Section title="Annotations">
      <Loaded state={state}>
        {(d) => (
          <div className="why-annotations">
            <Notes notes={d.notes} />
            <h3 className="sub-head">Host ranges (record_function)</h3>
            <div className="annotations-host">
              {d.host.length ? (
                <DataTable rows={d.host} cols={hCols} exportName={name("annotations-host")} pageSize={50} initialSort={{ id: "total", desc: true }} filterPlaceholder="Filter annotations…" />
              ) : (
                <div className="muted">No record_function ranges on the host.</div>
              )}
            </div>
            <h3 className="sub-head">{deviceWord} ranges (gpu_user_annotation)</h3>
            <div className="annotations-device">
              {d.device.length ? (
                <DataTable rows={d.device} cols={dCols} exportName={name("annotations-device")} pageSize={50} initialSort={{ id: "total", desc: true }} filterPlaceholder="Filter annotations…" />
              ) : (
                <div className="muted">No annotation ranges on the {deviceWord.toLowerCase()} timeline.</div>
              )}
            </div>
            <div className="muted small-note">Times in µs. ProfilerStep ranges are left out.</div>
          </div>
        )}
      </Loaded>
    </Section>
  );
}
