import { describe, expect, it } from "vitest";
import { foldedFrame, isLibraryFrame, isStackArg, openableFile, parseCallStack, parseFrame, shortFile } from "./frames";

describe("parseFrame", () => {
  it("splits file, 1-based line and function", () => {
    expect(parseFrame("torch/nn/modules/linear.py(130): forward")).toEqual({
      file: "torch/nn/modules/linear.py",
      line: 130,
      func: "forward",
    });
    expect(parseFrame("C:\\work\\train (copy).py(7): <module>")).toEqual({
      file: "C:\\work\\train (copy).py",
      line: 7,
      func: "<module>",
    });
  });
  it("keeps other text as the function", () => {
    expect(parseFrame("<built-in method conv2d>")).toEqual({ file: null, line: null, func: "<built-in method conv2d>" });
  });
});

describe("parseCallStack", () => {
  it("reads the legacy Call stack argument, innermost first", () => {
    const fs = parseCallStack("a/profiler.py(614): __enter__;b/step.py(313): step;run.py(1): <module>;");
    expect(fs.map((f) => f.line)).toEqual([614, 313, 1]);
    expect(fs[2]).toEqual({ file: "run.py", line: 1, func: "<module>" });
  });
  it("recognizes stack arguments", () => {
    expect(isStackArg("Call stack", "x.py(3): f;y.py(4): g")).toBe(true);
    expect(isStackArg("Call stack", "not a stack")).toBe(false);
    expect(isStackArg("Input Dims", "x.py(3): f")).toBe(false);
    expect(isStackArg("Call stack", 5)).toBe(false);
  });
});

describe("openableFile", () => {
  it("prefers the absolute path the server resolved", () => {
    expect(openableFile({ file: "cnn.py", line: 45, func: "forward", path: "/src/samples/cnn.py" })).toBe("/src/samples/cnn.py");
  });
  it("falls back to the recorded text", () => {
    expect(openableFile({ file: "cnn.py", line: 45, func: "forward" })).toBe("cnn.py");
    expect(openableFile({ file: "cnn.py", line: 45, func: "forward", path: null })).toBe("cnn.py");
    expect(openableFile({ file: "cnn.py", line: 45, func: "forward", path: "" })).toBe("cnn.py");
    expect(openableFile({ file: null, line: null, func: "<built-in>" })).toBeNull();
  });
});

describe("folded stacks show the user's own code", () => {
  const conv = { file: "torch/nn/modules/conv.py", line: 546, func: "_conv_forward" };
  const site = { file: "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line: 1784, func: "_call_impl" };
  const builtin = { file: null, line: null, func: "<built-in method conv2d of type object>" };
  const user = { file: "/home/me/cnn.py", line: 51, func: "forward" };
  it("tells library frames from the user's", () => {
    expect([conv, site, builtin, user].map(isLibraryFrame)).toEqual([true, true, true, false]);
    expect(isLibraryFrame({ file: "/usr/lib/python3.11/threading.py", line: 1, func: "run" })).toBe(true);
  });
  it("folds to the innermost user frame, else the innermost with a file", () => {
    expect(foldedFrame([builtin, conv, site, user])).toBe(user);
    expect(foldedFrame([builtin, conv, site])).toBe(conv);
    expect(foldedFrame([builtin])).toBe(builtin);
  });
  it("shortens installed packages' paths", () => {
    expect(shortFile(site.file)).toBe("torch/nn/modules/module.py");
    expect(shortFile(user.file)).toBe("/home/me/cnn.py");
  });
});
