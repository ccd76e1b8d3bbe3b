// Rendering a component into jsdom for a unit test, removed again after each test: the one
// helper every view's tests use (each test file still starts with
// `// @vitest-environment jsdom`).
import { act, type ReactNode } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach } from "vitest";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const mounted: { host: HTMLDivElement; root: Root }[] = [];

/** node rendered into a fresh element of the document (its container). */
export function mount(node: ReactNode): HTMLDivElement {
  const host = document.createElement("div");
  document.body.appendChild(host);
  const root = createRoot(host);
  act(() => root.render(node));
  mounted.push({ host, root });
  return host;
}

afterEach(() => {
  for (const { host, root } of mounted.splice(0)) {
    act(() => root.unmount());
    host.remove();
  }
});
