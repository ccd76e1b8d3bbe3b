import { describe, expect, it } from "vitest";
import {
  hrefWithHash, mergeIntoTbHash, parseState, sameState, serializeState, splitPairs, stateFromTbHash,
} from "./url";

describe("parseState / serializeState", () => {
  it("round-trips names with reserved characters", () => {
    const st = {
      view: "Operator" as const,
      run: "exp 1/resnet&co=#1",
      worker: "host_123.ünïcode",
      span: "2",
      q: "aten::add %",
    };
    const h = serializeState(st);
    expect(h.includes("#")).toBe(false);
    expect(h.split("&")).toHaveLength(5);
    expect(parseState("#" + h)).toEqual(st);
  });
  it("orders keys and drops empties", () => {
    expect(serializeState({ view: "Trace", span: "1", run: "r", worker: "" })).toBe(
      "run=r&span=1&view=Trace",
    );
  });
  it("defaults and normalizes the view, ignores unknown keys", () => {
    expect(parseState("")).toEqual({ view: "Overview" });
    expect(parseState("#view=kernel&bogus=1")).toEqual({ view: "Kernel" });
    // an unknown view is kept as badView: the app says "view 'nope' not found", not a silent Overview
    expect(parseState("#view=nope&run=a")).toEqual({ view: "Overview", run: "a", badView: "nope" });
  });
  it("survives malformed escapes", () => {
    expect(parseState("#run=%E0%A4%A&view=Trace")).toEqual({ view: "Trace", run: "%E0%A4%A" });
  });
  it("compares states", () => {
    expect(sameState({ view: "Overview", run: "a" }, { run: "a", view: "Overview" })).toBe(true);
    expect(sameState({ view: "Overview", run: "a" }, { view: "Overview", run: "b" })).toBe(false);
  });
});

describe("TensorBoard hash", () => {
  it("reads only our prefixed keys", () => {
    expect(stateFromTbHash("#scalars&tagFilter=x")).toBeNull();
    expect(
      stateFromTbHash("#pytorch_profiler&p.pytorch_profiler.run=a%2Fb&p.pytorch_profiler.view=Memory&p.other.run=z"),
    ).toEqual({ run: "a/b", view: "Memory" });
  });
  it("merges our keys after TensorBoard's own, replacing old ones", () => {
    const h = mergeIntoTbHash("#pytorch_profiler&smoothing=0.6&p.pytorch_profiler.run=old", {
      view: "Trace",
      run: "new run",
    });
    expect(h).toBe("#pytorch_profiler&smoothing=0.6&p.pytorch_profiler.run=new%20run&p.pytorch_profiler.view=Trace");
    expect(stateFromTbHash(h)).toEqual({ run: "new run", view: "Trace" });
    expect(splitPairs(h)[0]).toEqual(["pytorch_profiler", null]);
  });
  it("starts a hash when TensorBoard has none", () => {
    expect(mergeIntoTbHash("", { view: "Overview" })).toBe("#p.pytorch_profiler.view=Overview");
  });
});

describe("hrefWithHash", () => {
  it("replaces the fragment of the full address", () => {
    expect(hrefWithHash("http://h:6006/data/plugin_entry.html?name=pytorch_profiler", "view=Trace")).toBe(
      "http://h:6006/data/plugin_entry.html?name=pytorch_profiler#view=Trace",
    );
    expect(hrefWithHash("http://h/#old", "new")).toBe("http://h/#new");
    expect(hrefWithHash("http://h/#old", "")).toBe("http://h/");
  });
});
