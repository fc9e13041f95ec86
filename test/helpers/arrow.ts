// Arrow IPC helpers for tests: build request bodies and read query results.
import { tableFromIPC, tableToIPC, type Table } from "apache-arrow";

export const toStream = (t: Table): Uint8Array => tableToIPC(t, "stream");
export const fromIPC = (bytes: Uint8Array): Table => tableFromIPC(bytes);
