// Azure Blob Storage (az://container/prefix) through @azure/storage-blob, with object_store's
// Azure option names; the emulator (Azurite) by `use_emulator` or its endpoint.
import { bareETag, statusOf, type ObjectStore, type StorageOption } from "./object-store.js";

/** The container's client, from object_store's Azure options (or the environment). */
async function containerClient(container: string, option: StorageOption) {
  const { BlobServiceClient, StorageSharedKeyCredential } = await import("@azure/storage-blob");
  const account = option(["account_name", "azure_storage_account_name"], ["AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"]) ?? "";
  const emulator = option(["use_emulator", "azure_storage_use_emulator"], ["AZURE_STORAGE_USE_EMULATOR"]) === "true";
  const endpoint =
    option(["azure_storage_endpoint", "endpoint"], ["AZURE_STORAGE_ENDPOINT"]) ??
    (emulator ? `${process.env.AZURITE_BLOB_STORAGE_URL ?? "http://127.0.0.1:10000"}/${account}` : `https://${account}.blob.core.windows.net`);
  const key = option(["account_key", "azure_storage_account_key", "access_key"], ["AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_KEY"]);
  const sas = option(["sas_token", "azure_storage_sas_token", "sas_key"], ["AZURE_STORAGE_SAS_TOKEN"]);
  const service = key
    ? new BlobServiceClient(endpoint, new StorageSharedKeyCredential(account, key))
    : new BlobServiceClient(sas ? `${endpoint}?${sas.replace(/^\?/, "")}` : endpoint);
  return service.getContainerClient(container);
}

/**
 * Create the container unless it exists; true when it was created. A container that cannot be
 * created (credentials without the right, e.g. a container's SAS) is an error saying how to make it.
 */
export async function createContainerIfMissing(container: string, option: StorageOption): Promise<boolean> {
  const c = await containerClient(container, option);
  try {
    return (await c.createIfNotExists()).succeeded;
  } catch (err) {
    const why = `${statusOf(err) ?? ""} ${(err as { code?: string }).code ?? ""}`.trim() || "no reason given";
    throw new Error(`the container ${container} could not be checked or created (${why}): create it (e.g. \`az storage container create --name ${container}\`) or give credentials allowed to`);
  }
}

export async function openAzure(container: string, option: StorageOption): Promise<ObjectStore> {
  const c = await containerClient(container, option);
  const info = (name: string, p: { contentLength?: number; etag?: string; lastModified?: Date }) => ({
    key: name,
    size: p.contentLength ?? 0,
    eTag: bareETag(p.etag),
    mtimeMs: p.lastModified?.getTime() ?? Date.now(),
  });
  return {
    async children(prefix) {
      const out: string[] = [];
      for await (const item of c.listBlobsByHierarchy("/", { prefix })) out.push(item.name.slice(prefix.length));
      return out;
    },
    async objects(prefix) {
      const out = [];
      for await (const b of c.listBlobsFlat({ prefix })) out.push(info(b.name, b.properties));
      return out;
    },
    async head(name) {
      try {
        return info(name, await c.getBlobClient(name).getProperties());
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },
    get: (name) => c.getBlobClient(name).downloadToBuffer(),
    async putIfAbsent(name, data) {
      try {
        await c.getBlockBlobClient(name).upload(data, data.length, { conditions: { ifNoneMatch: "*" } });
        return true;
      } catch (err) {
        if (statusOf(err) === 409 || statusOf(err) === 412) return false;
        throw err;
      }
    },
    async remove(names) {
      await Promise.all(names.map((n) => c.getBlobClient(n).deleteIfExists()));
    },
  };
}
