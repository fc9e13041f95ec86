// A TCP relay between a server and its object store (Azurite), for tests of a store that stops
// answering: bytes are held, not dropped, so the server's store calls neither fail nor settle
// until the relay lets them through. Nothing of LanceDB or the store is replaced.
import { createServer, connect, type Socket } from "node:net";

export interface StoreProxy {
  /** http://127.0.0.1:<port>, in place of the store's address. */
  url: string;
  /** Hold every byte, both ways, on every connection (new ones too). */
  stall(): void;
  /** Stall once a request whose first bytes match `re` (e.g. `PUT /…/data/`) is sent; that request is held too. */
  stallAt(re: RegExp): void;
  /** Hold for good the `nth` request (the first by default) whose first bytes match `re`, and its connection; every other passes. */
  holdAt(re: RegExp, nth?: number): void;
  /** Whether a request holdAt named was sent (and is held). */
  holding(): boolean;
  /** Let new connections and those with no request held through; those holding one stay held for good (until resume()). */
  passNew(): void;
  /** Hold every chunk `ms` before it passes, both ways (a slow store); 0 for none. */
  delay(ms: number): void;
  /** Let everything through, held bytes first. */
  resume(): void;
  /** Whether bytes are held now. */
  stalled(): boolean;
  close(): Promise<void>;
}

interface Pipe {
  client: Socket;
  upstream: Socket;
  /** Held bytes, in order, with their direction. */
  held: { up: boolean; data: Buffer }[];
  /** Held for good (passNew): a request it carries never settles. */
  frozen: boolean;
  /** Held by holdAt: kept open when the store closes its side, until resume(). */
  kept: boolean;
}

export async function startStoreProxy(target: string): Promise<StoreProxy> {
  const { hostname, port } = new URL(target);
  const pipes = new Set<Pipe>();
  let stalled = false;
  let trigger: RegExp | null = null;
  let hold: RegExp | null = null;
  /** Requests matching `hold` still to pass before the one it holds. */
  let holdAfter = 0;
  let holding = false;
  let delayMs = 0;
  // Chunks of one direction keep their order: timers of one duration fire in the order set.
  const pass = (to: Socket, data: Buffer) => (delayMs > 0 ? setTimeout(() => to.write(data), delayMs) : to.write(data));
  const holds = (p: Pipe) => p.frozen || stalled;
  const flush = (p: Pipe) => {
    for (const h of p.held.splice(0)) (h.up ? p.upstream : p.client).write(h.data);
  };
  const endPipe = (p: Pipe) => {
    pipes.delete(p);
    p.client.destroy();
    p.upstream.destroy();
  };
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    const p: Pipe = { client, upstream, held: [], frozen: false, kept: false };
    pipes.add(p);
    client.on("data", (data) => {
      if (hold?.test(data.toString("latin1")) && holdAfter-- === 0) {
        hold = null;
        holding = true;
        p.frozen = true;
        p.kept = true;
      }
      if (!stalled && trigger?.test(data.toString("latin1"))) {
        trigger = null;
        stalled = true;
      }
      if (holds(p)) p.held.push({ up: true, data });
      else pass(upstream, data);
    });
    upstream.on("data", (data) => {
      if (holds(p)) p.held.push({ up: false, data });
      else pass(client, data);
    });
    const end = () => endPipe(p);
    client.on("close", end).on("error", end);
    // The store closes a connection idle past its keep-alive (Azurite: 5 s), as a held request's
    // is to it: a request holdAt holds stays held, and resume() closes it (its client tries again).
    const upstreamEnd = () => (p.kept ? void upstream.destroy() : end());
    upstream.on("close", upstreamEnd).on("error", upstreamEnd);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    stall: () => void (stalled = true),
    stallAt: (re) => void (trigger = re),
    holdAt(re, nth = 1) {
      hold = re;
      holdAfter = nth - 1;
    },
    holding: () => holding,
    delay: (ms) => void (delayMs = ms),
    passNew() {
      // Kept as holdAt keeps its request: when the store closes such a connection idle (Azurite: 5 s),
      // its client would try again on a new one, which passes, and the request was not held for good.
      for (const p of pipes) if (p.held.some((h) => h.up)) p.frozen = p.kept = true;
      stalled = false;
      for (const p of pipes) if (!p.frozen) flush(p);
    },
    resume() {
      stalled = false;
      trigger = null;
      hold = null;
      for (const p of pipes) {
        p.frozen = false;
        if (p.kept && p.upstream.destroyed) endPipe(p);
        else flush(p);
      }
    },
    stalled: () => stalled,
    async close() {
      for (const p of pipes) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
