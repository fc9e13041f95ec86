// Azure Blob Storage (az://container/prefix) through @azure/storage-blob, with object_store's
// Azure option names; the emulator (Azurite) by `use_emulator` or its endpoint.
import { bareETag, statusOf, type ObjectStore, type StorageOption } from "./object-store.js";

/** What a container's client was made from: the names an error about it gives. */
interface Reached {
  account: string;
  endpoint: string;
  /** Which credential was given (its option's name), or null for none. */
  credential: "account_key" | "sas_token" | null;
}

/** The container's client, from object_store's Azure options (or the environment). */
async function containerClient(container: string, option: StorageOption) {
  const { BlobServiceClient, StorageSharedKeyCredential } = await import("@azure/storage-blob");
  const account = option(["account_name", "azure_storage_account_name"], ["AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"]) ?? "";
  const emulator = option(["use_emulator", "azure_storage_use_emulator"], ["AZURE_STORAGE_USE_EMULATOR"]) === "true";
  const given = option(["azure_storage_endpoint", "endpoint"], ["AZURE_STORAGE_ENDPOINT"]);
  const endpoint = given ?? (emulator ? `${process.env.AZURITE_BLOB_STORAGE_URL ?? "http://127.0.0.1:10000"}/${account}` : `https://${account}.blob.core.windows.net`);
  const key = option(["account_key", "azure_storage_account_key", "access_key"], ["AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_KEY"]);
  const sas = option(["sas_token", "azure_storage_sas_token", "sas_key"], ["AZURE_STORAGE_SAS_TOKEN"]);
  // Without an account, a shared key signs for nobody and the default endpoint names no host.
  if (!account && (key || !given)) throw new Error("no storage account is named: give the account_name storage option (or AZURE_STORAGE_ACCOUNT_NAME)");
  const service = key
    ? new BlobServiceClient(endpoint, new StorageSharedKeyCredential(account, key))
    : new BlobServiceClient(sas ? `${endpoint}?${sas.replace(/^\?/, "")}` : endpoint);
  const reached: Reached = { account, endpoint, credential: key ? "account_key" : sas ? "sas_token" : null };
  return { client: service.getContainerClient(container), reached };
}

/** What is missing or refused, by the store's answer to a container check or create. */
function unusable(container: string, { account, endpoint, credential }: Reached, err: unknown): string {
  const status = statusOf(err);
  const code = (err as { code?: string }).code ?? "";
  const answer = `${status ?? ""} ${code}`.trim() || "no reason given";
  if (status === undefined) return `the endpoint ${endpoint} could not be reached (${answer}): check the azure_storage_endpoint storage option (or account_name, which names the default endpoint) and the network`;
  if (status === 403 && /AuthenticationFailed|AuthorizationFailure/.test(code)) {
    if (credential === null) return `${endpoint} refused a request without credentials (${answer}): give the account_key or sas_token storage option`;
    if (credential === "account_key") return `${endpoint} refused the account_key given for account ${account} (${answer}): the key is not that account's`;
    return `${endpoint} refused the sas_token given (${answer}): it is not valid for account ${account || "(none named)"}, or it expired`;
  }
  if (status === 403 || status === 404)
    return `the container ${container} does not exist at ${endpoint}, or the ${credential ?? "anonymous access"} given may not check or create it (${answer}): create it (e.g. \`az storage container create --name ${container}\`), or give an account_key, which may create it`;
  return `the container ${container} could not be checked or created at ${endpoint} (${answer})`;
}

/**
 * Create the container unless it exists; true when it was created. One that cannot be checked or
 * created is an error naming what is missing or refused: the account, its key or SAS, the
 * endpoint, or the container (credentials without the right to create it, e.g. a container's SAS).
 */
export async function createContainerIfMissing(container: string, option: StorageOption): Promise<boolean> {
  const { client, reached } = await containerClient(container, option);
  try {
    return (await client.createIfNotExists()).succeeded;
  } catch (err) {
    throw new Error(unusable(container, reached, err));
  }
}

export async function openAzure(container: string, option: StorageOption): Promise<ObjectStore> {
  const c = (await containerClient(container, option)).client;
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
    // One GET: downloadToBuffer asks for the blob's size first, a HEAD before every read.
    async get(name) {
      const parts: Buffer[] = [];
      try {
        for await (const part of (await c.getBlobClient(name).download()).readableStreamBody!) parts.push(Buffer.isBuffer(part) ? part : Buffer.from(part));
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
      return Buffer.concat(parts);
    },
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
