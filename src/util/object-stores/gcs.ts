// Google Cloud Storage (gs://bucket/prefix) through @google-cloud/storage, with object_store's GCS
// option names; credentials otherwise from Application Default Credentials. The put-if-absent is a
// write conditioned on generation 0 (no live object).
import { bareETag, statusOf, type ObjectStore, type StorageOption } from "./object-store.js";

export async function openGcs(bucket: string, option: StorageOption): Promise<ObjectStore> {
  const { Storage } = await import("@google-cloud/storage");
  const keyJson = option(["google_service_account_key", "service_account_key"]);
  const storage = new Storage({
    keyFilename: option(["google_service_account", "service_account", "google_service_account_path", "service_account_path"], ["GOOGLE_APPLICATION_CREDENTIALS"]),
    credentials: keyJson ? JSON.parse(keyJson) : undefined,
  });
  const b = storage.bucket(bucket);
  type Meta = { size?: string | number; etag?: string; updated?: string };
  const info = (key: string, m: Meta) => ({ key, size: Number(m.size ?? 0), eTag: bareETag(m.etag), mtimeMs: m.updated ? Date.parse(m.updated) : Date.now() });
  return {
    async children(prefix) {
      const out: string[] = [];
      let query: object | null = { prefix, delimiter: "/", autoPaginate: false };
      while (query) {
        const [files, next, response]: [{ name: string }[], object | null | undefined, unknown] = await b.getFiles(query);
        for (const f of files) out.push(f.name.slice(prefix.length));
        for (const p of (response as { prefixes?: string[] } | undefined)?.prefixes ?? []) out.push(p.slice(prefix.length));
        query = next ?? null;
      }
      return out;
    },
    async objects(prefix) {
      const [files] = await b.getFiles({ prefix });
      return files.map((f) => info(f.name, f.metadata as Meta));
    },
    async head(key) {
      try {
        const [m] = await b.file(key).getMetadata();
        return info(key, m as Meta);
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },
    async get(key) {
      try {
        const [data] = await b.file(key).download();
        return data;
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },
    async putIfAbsent(key, data) {
      try {
        await b.file(key).save(data, { resumable: false, preconditionOpts: { ifGenerationMatch: 0 } });
        return true;
      } catch (err) {
        if (statusOf(err) === 412) return false;
        throw err;
      }
    },
    async remove(keys) {
      await Promise.all(keys.map((k) => b.file(k).delete({ ignoreNotFound: true })));
    },
  };
}
