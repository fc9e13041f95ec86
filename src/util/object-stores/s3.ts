// S3 and S3-compatible stores (s3://bucket/prefix) through @aws-sdk/client-s3, with object_store's
// AWS option names; credentials and region otherwise from the SDK's own chain (AWS_* variables,
// profiles, instance roles). The put-if-absent is `If-None-Match: *`, which the store must support
// (docs/configuration.md, "Object storage").
import { bareETag, statusOf, type ObjectStore, type StorageOption } from "./object-store.js";

export async function openS3(bucket: string, option: StorageOption): Promise<ObjectStore> {
  const s3 = await import("@aws-sdk/client-s3");
  const endpoint = option(["aws_endpoint", "endpoint", "aws_endpoint_url"], ["AWS_ENDPOINT", "AWS_ENDPOINT_URL"]);
  const id = option(["aws_access_key_id", "access_key_id"]);
  const secret = option(["aws_secret_access_key", "secret_access_key"]);
  const client = new s3.S3Client({
    region: option(["aws_region", "region"], ["AWS_REGION", "AWS_DEFAULT_REGION"]) ?? "us-east-1",
    endpoint,
    // object_store addresses a custom endpoint by path unless told to use virtual hosts.
    forcePathStyle: endpoint !== undefined && option(["aws_virtual_hosted_style_request", "virtual_hosted_style_request"]) !== "true",
    credentials: id && secret ? { accessKeyId: id, secretAccessKey: secret, sessionToken: option(["aws_session_token", "session_token", "token"]) } : undefined,
  });
  async function* pages(prefix: string, delimiter?: string) {
    let token: string | undefined;
    do {
      const r = await client.send(new s3.ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, Delimiter: delimiter, ContinuationToken: token }));
      yield r;
      token = r.NextContinuationToken;
    } while (token);
  }
  return {
    async children(prefix) {
      const out: string[] = [];
      for await (const r of pages(prefix, "/")) {
        for (const p of r.CommonPrefixes ?? []) out.push(p.Prefix!.slice(prefix.length));
        for (const o of r.Contents ?? []) out.push(o.Key!.slice(prefix.length));
      }
      return out;
    },
    async objects(prefix) {
      const out = [];
      for await (const r of pages(prefix)) {
        for (const o of r.Contents ?? []) out.push({ key: o.Key!, size: o.Size ?? 0, eTag: bareETag(o.ETag), mtimeMs: o.LastModified?.getTime() ?? Date.now() });
      }
      return out;
    },
    async head(key) {
      try {
        const h = await client.send(new s3.HeadObjectCommand({ Bucket: bucket, Key: key }));
        return { key, size: h.ContentLength ?? 0, eTag: bareETag(h.ETag), mtimeMs: h.LastModified?.getTime() ?? Date.now() };
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },
    async get(key) {
      try {
        const r = await client.send(new s3.GetObjectCommand({ Bucket: bucket, Key: key }));
        return Buffer.from(await r.Body!.transformToByteArray());
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },
    async putIfAbsent(key, data) {
      try {
        await client.send(new s3.PutObjectCommand({ Bucket: bucket, Key: key, Body: data, IfNoneMatch: "*" }));
        return true;
      } catch (err) {
        if (statusOf(err) === 412 || statusOf(err) === 409) return false;
        throw err;
      }
    },
    async remove(keys) {
      for (let i = 0; i < keys.length; i += 1000) {
        const batch = keys.slice(i, i + 1000).map((Key) => ({ Key }));
        await client.send(new s3.DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: batch, Quiet: true } }));
      }
    },
  };
}
