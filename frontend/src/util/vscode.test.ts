import { describe, expect, it } from "vitest";
import { LINE_ONE, buildJumpMessage, findVsCodeTarget, frameLocation } from "./vscode";

describe("buildJumpMessage", () => {
  it("sends the 0-based line VS Code selects", () => {
    expect(buildJumpMessage("/src/train.py", 42)).toEqual({ filename: "/src/train.py", line: 41 });
    expect(buildJumpMessage("torch/nn/modules/linear.py", 2)).toEqual({
      filename: "torch/nn/modules/linear.py",
      line: 1,
    });
  });
  it("keeps line-1 frames: a truthy line the integration accepts and does not select", () => {
    const m = buildJumpMessage("/src/model.py", 1);
    expect(m).not.toBeNull();
    expect(m!.line).toBe(LINE_ONE);
    // the integration's own checks: drops falsy lines, selects only when line < lineCount
    expect(!!m!.line).toBe(true);
    expect(m!.line < 1_000_000).toBe(false);
  });
  it("refuses frames without a file or line", () => {
    expect(buildJumpMessage(null, 3)).toBeNull();
    expect(buildJumpMessage("", 3)).toBeNull();
    expect(buildJumpMessage("a.py", null)).toBeNull();
    expect(buildJumpMessage("a.py", 0)).toBeNull();
    expect(buildJumpMessage("a.py", 2.5)).toBeNull();
    expect(buildJumpMessage("<frozen importlib._bootstrap>", 10)).toBeNull();
  });
});

describe("findVsCodeTarget", () => {
  it("finds the nearest webview ancestor", () => {
    // plugin iframe in TensorBoard in the VS Code webview
    expect(
      findVsCodeTarget(["http://localhost:6006", "vscode-webview://abc123", "vscode-webview://abc123", "vscode-file://vscode-app"]),
    ).toEqual({ hops: 2, origin: "vscode-webview://abc123" });
    // standalone page framed directly by the webview
    expect(findVsCodeTarget(["vscode-webview://x"])).toEqual({ hops: 1, origin: "vscode-webview://x" });
    // browser-based VS Code
    expect(findVsCodeTarget(["http://127.0.0.1:6006", "https://1a2b.vscode-cdn.net"])).toEqual({
      hops: 2,
      origin: "https://1a2b.vscode-cdn.net",
    });
  });
  it("is null outside VS Code", () => {
    expect(findVsCodeTarget(null)).toBeNull();
    expect(findVsCodeTarget([])).toBeNull();
    expect(findVsCodeTarget(["http://localhost:6006"])).toBeNull();
    expect(findVsCodeTarget(["https://evil.example/vscode-webview:"])).toBeNull();
  });
});

describe("frameLocation", () => {
  it("formats file:line", () => {
    expect(frameLocation("a.py", 3)).toBe("a.py:3");
    expect(frameLocation("a.py", null)).toBe("a.py");
    expect(frameLocation(null, 3)).toBe("");
  });
});
