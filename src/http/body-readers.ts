// Places for request bodies that are still arriving. A reader holds no execution slot, but each
// costs a connection and its buffered bytes, so they are bounded overall, per client address and
// per credential (one client cannot take them all), and clients that send no credential header
// (whose credential is in the body) have a smaller pool of their own.
import type { Refusal } from "./refusals.js";

export interface ReaderLimits {
  maxBodyReaders: number;
  maxBodyReadersPerAddress: number;
  maxBodyReadersPerCredential: number;
  maxIdentityBodyReaders: number;
}

export interface BodyReaders {
  /** A place for one body from `address`, for `subject` (null: no header credential): its release, or why not. */
  take(address: string, subject: string | null): { release: () => void } | { refusal: Refusal };
  /** Bodies arriving now. */
  count(): number;
}

const refusal = (reason: Refusal["reason"], message: string): { refusal: Refusal } => ({ refusal: { reason, message, retryAfterS: 1 } });

export function createBodyReaders(limits: ReaderLimits): BodyReaders {
  let all = 0;
  let identity = 0;
  const byAddress = new Map<string, number>();
  const bySubject = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, d: number) => {
    const n = (m.get(k) ?? 0) + d;
    if (n === 0) m.delete(k);
    else m.set(k, n);
  };
  return {
    take(address, subject) {
      if (all >= limits.maxBodyReaders) return refusal("body_readers", `more than ${limits.maxBodyReaders} request bodies arriving; retry later`);
      if ((byAddress.get(address) ?? 0) >= limits.maxBodyReadersPerAddress) {
        return refusal("address_body_readers", `more than ${limits.maxBodyReadersPerAddress} request bodies arriving from this address; retry later`);
      }
      if (subject === null && identity >= limits.maxIdentityBodyReaders) {
        return refusal("identity_body_readers", `more than ${limits.maxIdentityBodyReaders} request bodies without a credential header arriving; send x-api-key or Authorization, or retry later`);
      }
      if (subject !== null && (bySubject.get(subject) ?? 0) >= limits.maxBodyReadersPerCredential) {
        return refusal("credential_body_readers", `more than ${limits.maxBodyReadersPerCredential} request bodies arriving for this credential; retry later`);
      }
      all++;
      add(byAddress, address, 1);
      if (subject === null) identity++;
      else add(bySubject, subject, 1);
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          all--;
          add(byAddress, address, -1);
          if (subject === null) identity--;
          else add(bySubject, subject, -1);
        },
      };
    },
    count: () => all,
  };
}
