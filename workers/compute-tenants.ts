// The server's compute sandboxes (the checks of add_columns, alter_columns and view create run user
// code): one sandbox process per tenant, so different tenants' code never shares a process or an
// interpreter, at once or later. A tenant here is a credential scope: the path that the calling
// credential's longest prefix covering the object names, or for an unscoped credential the
// object's top-level namespace (src/auth/principal.ts, sandboxScope); keys limited to `ns3$a` and
// `ns3$b` never share a sandbox. At most `sandboxes` live at once, least recently used first
// out: a tenant without one takes an idle one's place (killed, never handed over), or waits for one
// to go idle, in turn. Each tenant's tasks queue in its own sandbox, `workers` running at once and
// `admitted` admitted at most (more are 503 at once), so one tenant's slow code costs another
// only its share of the CPU. Sandboxes idle for IDLE_MS are closed. With `spare`
// (--spare-processes), one more is kept started and unassigned, so a tenant's first check does not
// wait for a process to start (seconds on a loaded machine); a tenant takes it before it ever runs
// code, and a new spare starts. A backfill or view refresh runs in a job process with a sandbox of
// its own (workers/processes/job-process.ts).
import { createCompute, type Compute, type SandboxOptions, type SpareCompute } from "./compute-client.js";

export interface TenantCompute {
  /** What runs `tenant`'s code (its sandbox starts on its first task). */
  of(tenant: string): TenantTasks;
  close(): Promise<void>;
}

export type TenantTasks = Pick<Compute, "run">;

/** How long a sandbox with nothing to do is kept. */
const IDLE_MS = 60_000;

export function createTenantCompute({ sandboxes, spare: keepSpare, ...options }: Omit<SandboxOptions, "tenant"> & { sandboxes: number; spare: boolean }): TenantCompute {
  // Each tenant's sandbox, with the tasks handed to it and not yet answered.
  const live = new Map<string, { compute: Compute; tasks: number; usedAt: number }>();
  // Tenants waiting for a place, in turn.
  const turns: { tenant: string; take(c: Compute | null): void }[] = [];
  let closed = false;
  let spare: SpareCompute | null = null;

  /** The tenant's sandbox, with one more task counted, made when a place is free or idle; null when every place is busy. */
  function claim(tenant: string): Compute | null {
    if (closed) return null;
    let e = live.get(tenant);
    if (!e) {
      if (live.size >= sandboxes) {
        const idle = [...live].filter(([, x]) => x.tasks === 0).sort((a, b) => a[1].usedAt - b[1].usedAt)[0];
        if (!idle) return null;
        live.delete(idle[0]);
        void idle[1].compute.close();
      }
      const compute = spare ?? createCompute({ ...options, tenant: null });
      compute.assign(tenant);
      spare = keepSpare ? createCompute({ ...options, tenant: null }) : null;
      spare?.warm();
      e = { compute, tasks: 0, usedAt: 0 };
      live.set(tenant, e);
    }
    e.tasks++;
    e.usedAt = Date.now();
    return e.compute;
  }

  /** A task of `tenant` ended: the tenants waiting take the places that went idle, in turn. */
  function release(tenant: string): void {
    const e = live.get(tenant);
    if (e) {
      e.tasks--;
      e.usedAt = Date.now();
    }
    while (turns.length > 0) {
      const c = claim(turns[0].tenant);
      if (!c) break;
      turns.shift()!.take(c);
    }
  }

  const retire = setInterval(() => {
    for (const [tenant, e] of live) {
      if (e.tasks === 0 && Date.now() - e.usedAt > IDLE_MS) {
        live.delete(tenant);
        void e.compute.close();
      }
    }
    // No tenant left: no spare either, until one comes back.
    if (live.size === 0 && spare) {
      void spare.close();
      spare = null;
    }
  }, IDLE_MS / 4);
  retire.unref();

  const of = (tenant: string): TenantTasks => ({
    async run(task, deadlineMs) {
      // A tenant without a sandbox queues behind those already waiting for one.
      const now = live.has(tenant) || turns.length === 0 ? claim(tenant) : null;
      const compute = closed ? null : (now ?? (await new Promise<Compute | null>((take) => turns.push({ tenant, take }))));
      if (!compute) return { error: "the compute sandbox was closed" };
      try {
        return await compute.run(task, deadlineMs);
      } finally {
        release(tenant);
      }
    },
  });

  return {
    of,
    async close() {
      closed = true;
      clearInterval(retire);
      for (const t of turns.splice(0)) t.take(null);
      await Promise.all([...[...live.values()].map((e) => e.compute), ...(spare ? [spare] : [])].map((c) => c.close()));
      live.clear();
    },
  };
}
