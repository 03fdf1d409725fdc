// The console is served under /console/ on the API's own origin (docs/console.md).
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  base: "/console/",
  plugins: [react()],
  build: { outDir: "dist", sourcemap: false, chunkSizeWarningLimit: 900 },
  // changeOrigin off (the string shorthand turns it on): the API must see the page's own Host,
  // which its Origin matches, or it refuses the signed-in writes (docs/auth.md, Cross-site writes).
  server: { proxy: { "/v1": { target: "http://127.0.0.1:8000", changeOrigin: false } } },
});
