// A table's versions, listed while a cleanup may remove old ones: LanceDB lists the manifest files
// and then reads each, so a manifest deleted in between fails the whole listing ("Not found:
// …/_versions/….manifest", seen under automatic maintenance). Listing again sees the cleanup's result.
import type * as lancedb from "@lancedb/lancedb";
import { errorText } from "./messages.js";

// A cleanup removes manifests one after another for a while: back off between listings.
const ATTEMPTS = 8;

/**
 * A manifest a cleanup removed while it was being read: by a listing, or by a cached handle still
 * at a version the cleanup retired (`--retain-versions-ms` shorter than the consistency interval).
 */
export const manifestVanished = (err: unknown) => /Not found: .*_versions\/[^ ,]*\.manifest/.test(errorText(err));

export async function listVersions(table: lancedb.Table): Promise<lancedb.Version[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await table.listVersions();
    } catch (err) {
      if (!manifestVanished(err) || attempt >= ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, 50 * attempt));
    }
  }
}
