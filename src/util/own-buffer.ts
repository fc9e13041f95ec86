// Moving a buffer to another thread (a Piscina task's transfer list) detaches all of it.

/**
 * Only a buffer the view spans whole can be transferred (small bodies live in Node's shared pool).
 * A copy through the Uint8Array constructor: Buffer's slice() is a view of the same memory, and
 * moving Node's pool would detach it (Node 22 refuses with a DataCloneError).
 */
export const ownBuffer = (b: Uint8Array): Uint8Array =>
  b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : new Uint8Array(b);
