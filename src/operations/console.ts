// GET /console: the web console's static files (built into dist/console/ by `npm run build`),
// read once and served from memory. The page itself holds no data: it calls the API with the key
// the user signs in with, so it needs no credential.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { transport } from "../errors.js";
import { publicOp } from "./define.js";
import type { OpResult } from "./types.js";

// dist/src/operations/console.js → dist/console/
const DIR = fileURLToPath(new URL("../../console/", import.meta.url));

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".png": "image/png",
  ".svg": "image/svg+xml",
};

// Only the console's own files run on the page, and it talks only to this server.
const HEADERS = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
};

let files: Map<string, Buffer> | null = null;

function load(): Map<string, Buffer> {
  if (files) return files;
  const found = new Map<string, Buffer>();
  try {
    for (const name of readdirSync(DIR)) if (TYPES[path.extname(name)]) found.set(name, readFileSync(path.join(DIR, name)));
  } catch {
    // Not built: every file answers 404 below.
  }
  files = found;
  return found;
}

function serve(name: string): OpResult {
  const body = load().get(name);
  if (!body) throw transport.noRoute(`no such console file: ${name}`);
  return { kind: "bytes", contentType: TYPES[path.extname(name)], headers: HEADERS, chunks: [body] };
}

export const consolePage = publicOp(async () => serve("index.html"), { produces: "text/html" });
export const consoleFile = publicOp(async ({ params }) => serve(params.file), { produces: "*/*" });
