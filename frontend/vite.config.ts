/// <reference types="vitest/config" />
// Builds the UI as one ES module (index.js) plus one stylesheet (index.css) into
// tb_profiler/plugin/static/, the folder the Python plugin serves under
// data/plugin/pytorch_profiler/. TensorBoard imports index.js (es_module_path) and
// calls its exported render(); `tb-profiler serve` does the same from its "/" page.
// No HTML entry, no CDN, no hashed names, no code splitting: two files, all assets in
// them. (index.html here is only the `npm run dev` page.)
import { defineConfig } from "vite";

export default defineConfig({
  base: "./",
  publicDir: false,
  define: {
    // index.css is linked as index.css?v=<build>: a rebuilt bundle never meets a cached stylesheet
    __BUILD_ID__: JSON.stringify(Date.now().toString(36)),
  },
  server: {
    // `npm run dev` against a running `tb-profiler serve LOGDIR --port 6006`
    proxy: { "/data": "http://127.0.0.1:6006" },
  },
  build: {
    outDir: "../tb_profiler/plugin/static",
    emptyOutDir: true,
    target: "es2020",
    sourcemap: false,
    cssCodeSplit: false,
    assetsInlineLimit: 100000,
    chunkSizeWarningLimit: 2000,
    rollupOptions: {
      input: "src/main.tsx",
      preserveEntrySignatures: "exports-only",
      output: {
        format: "es",
        entryFileNames: "index.js",
        chunkFileNames: "index-[name].js",
        assetFileNames: (info) =>
          (info.names ?? []).some((n) => n.endsWith(".css")) ? "index.css" : "[name][extname]",
        codeSplitting: false,
      },
    },
  },
  test: {
    include: ["src/**/*.test.ts", "src/**/*.test.tsx"],
    environment: "node",
  },
});
