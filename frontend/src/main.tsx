// Entry of the bundle. TensorBoard imports index.js inside its plugin iframe
// (data/plugin_entry.html) and calls render(); `tb-profiler serve` does the same from
// its own page. The stylesheet is built next to index.js as index.css and linked from
// here, resolved against this module's address (works under any path prefix and
// whatever the document's <base>).

import { StrictMode } from "react";
import { createRoot, type Root } from "react-dom/client";
import { App } from "./App";
import { startStore } from "./state/store";
import "./styles.css";

declare const __BUILD_ID__: string;

let root: Root | null = null;

function linkStylesheet(): void {
  if (import.meta.env.DEV) return; // the dev server injects styles itself
  const href = new URL(/* @vite-ignore */ `index.css?v=${__BUILD_ID__}`, import.meta.url).href;
  if (document.querySelector(`link[data-tbp-css]`)) return;
  const link = document.createElement("link");
  link.rel = "stylesheet";
  link.href = href;
  link.dataset.tbpCss = "1";
  document.head.appendChild(link);
}

export function render(): void {
  if (root) return;
  linkStylesheet();
  // no /favicon.ico request from the standalone page (TensorBoard's frame has its own)
  if (!document.querySelector("link[rel~='icon']") && window.parent === window) {
    const icon = document.createElement("link");
    icon.rel = "icon";
    icon.href = "data:,";
    document.head.appendChild(icon);
  }
  if (!document.title) document.title = "PyTorch Profiler";
  let el = document.getElementById("tbp-root");
  if (!el) {
    el = document.createElement("div");
    el.id = "tbp-root";
    document.body.appendChild(el);
  }
  startStore();
  root = createRoot(el);
  root.render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}

export default render;
