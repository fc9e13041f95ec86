// The bare uWS baseline for cheap operations: answers every request with its own body, nothing
// else. Run as a child process by bench/load.ts (like Quiver), so both pay the same socket costs.
// Prints `listening on http://127.0.0.1:<port>`, as Quiver does.
import type { us_socket } from "uws-pack";
import { loadUws } from "../src/util/runtime.js";

// The same uWS build Quiver loads on this runtime.
const uWS = await loadUws();
const app = uWS.App();
app.any("/*", (res) => {
  const parts: Buffer[] = [];
  let aborted = false;
  res.onAborted(() => (aborted = true));
  res.onData((chunk, isLast) => {
    parts.push(Buffer.from(chunk.slice(0)));
    if (isLast && !aborted) res.cork(() => res.writeHeader("content-type", "application/json").end(Buffer.concat(parts)));
  });
});
app.listen("127.0.0.1", 0, (socket) => {
  if (!socket) throw new Error("echo server: cannot listen");
  console.log(`listening on http://127.0.0.1:${uWS.us_socket_local_port(socket as unknown as us_socket)}`);
});
