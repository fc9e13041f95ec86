// A request made to hang: add_columns of a JavaScript UDF whose loading spins (add_columns checks
// it in a sandbox process; the sandbox has no Atomics.wait), holding its slot `ms` long.
import type { Quiver } from "./quiver.js";

/** add_columns on table `t` of a UDF whose loading spins `ms`: the request holds its slot that long. */
export const hang = (q: Pick<Quiver, "call">, column: string, ms: number) =>
  q.call("POST", "/v1/table/t/add_columns", {
    new_columns: [
      {
        name: column,
        virtual_column: {
          udf_backend: "js",
          udf: `(() => { const end = Date.now() + ${ms}; while (Date.now() < end); return (x) => x; })()`,
          input_columns: ["x"],
          outputs: [{ column, data_type: { type: "int64" }, nullable: true }],
        },
      },
    ],
  });
