import { describe, expect, it } from "vitest";
import { absoluteUrl, routeUrl, setApiBase } from "./client";

describe("routeUrl", () => {
  it("encodes parameters in a stable order and drops empties", () => {
    expect(routeUrl("overview", { span: "2", run: "exp 1/a&b", worker: undefined })).toBe(
      "overview?run=exp+1%2Fa%26b&span=2",
    );
    expect(routeUrl("runs")).toBe("runs");
  });
  it("resolves routes under the bundle's prefix, any path prefix kept", () => {
    setApiBase("http://host:6006/proxy/6006/data/plugin/pytorch_profiler");
    expect(absoluteUrl("operation/table", { run: "r" })).toBe(
      "http://host:6006/proxy/6006/data/plugin/pytorch_profiler/operation/table?run=r",
    );
  });
});
