// @vitest-environment jsdom
// The compiled-kernels columns: launch config text, NaN (null) figures shown as "–" by
// their kinds, and the kernel file cell opening the generated file in VS Code at line 1
// the way a stack frame does (FrameItem -> jumpToSource).
import { act } from "react";
import { createRoot } from "react-dom/client";
import { afterEach, describe, expect, it, vi } from "vitest";
import { compiledColumns, type CompiledRow } from "./Compiled";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const env = vi.hoisted(() => ({ jumps: [] as [unknown, unknown][] }));

vi.mock("../../util/vscode", async (original) => {
  const real = await original<typeof import("../../util/vscode")>();
  return {
    ...real,
    vsCodeTarget: () => ({ hops: 1, origin: "vscode-webview://x" }),
    jumpToSource: (file: unknown, line: unknown) => {
      env.jumps.push([file, line]);
      return true;
    },
  };
});

const ROW: CompiledRow = {
  name: "triton_tem_fused_mm_1", kernel_backend: "triton", kernel_file: "/tmp/torchinductor_u/7q/c7q.py",
  kernel_path: null, kernel_hash: "7q", kernel_kwargs: "BLOCK_M=64,BLOCK_N=64", kernel_name: "triton_tem_fused_mm_1",
  num_warps: 8, num_stages: 3, calls: 3, device_ns: 64000, flops: 12582912, bytes: 688128, tflops: 0.196608,
  tbps: 0.010752, device_kernels: 3,
  provenance: { post_grad_nodes: ["mm"], pre_grad_nodes: ["matmul"], frames: [{ file: "/home/u/model.py", line: 13, func: "forward", path: null }] },
};

let host: HTMLDivElement | null = null;
afterEach(() => {
  host?.remove();
  host = null;
  env.jumps.length = 0;
});

function cell(id: string, row: CompiledRow) {
  const col = compiledColumns(true).find((c) => c.id === id)!;
  host = document.createElement("div");
  document.body.appendChild(host);
  const root = createRoot(host);
  act(() => root.render(<>{col.render!(row)}</>));
  return host;
}

describe("compiled kernels", () => {
  it("has the columns the issue names, launch config in one cell", () => {
    const cols = compiledColumns(false);
    expect(cols.map((c) => c.header)).toEqual(["Kernel", "Backend", "Launch config", "Calls", "Device time", "FLOPs", "Bytes", "TFLOP/s", "TB/s", "Kernel file"]);
    expect(cols.find((c) => c.id === "config")!.value(ROW)).toBe("warps=8, stages=3, BLOCK_M=64,BLOCK_N=64");
    expect(cols.find((c) => c.id === "flops")!.value({ ...ROW, flops: null })).toBeNull();
    expect(compiledColumns(true).map((c) => c.id)).toContain("prov");
  });

  it("opens the generated file in VS Code at line 1, as a stack frame", () => {
    const el = cell("file", ROW);
    const btn = el.querySelector("button.frame-loc") as HTMLButtonElement;
    expect(btn.textContent).toBe("/tmp/torchinductor_u/7q/c7q.py:1");
    act(() => btn.click());
    expect(env.jumps).toEqual([["/tmp/torchinductor_u/7q/c7q.py", 1]]);
  });

  it("shows the fused nodes and the user's source lines", () => {
    const el = cell("prov", ROW);
    expect(el.textContent).toContain("mm");
    const btn = el.querySelector("button.frame-loc") as HTMLButtonElement;
    act(() => btn.click());
    expect(env.jumps).toEqual([["/home/u/model.py", 13]]);
  });
});
