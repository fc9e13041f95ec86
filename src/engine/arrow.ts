// LanceDB loads apache-arrow's CommonJS build; an ESM `import "apache-arrow"` would load a second
// copy whose classes LanceDB does not recognise. Everything handed to LanceDB uses this copy.
import { createRequire } from "node:module";

export const arrow = createRequire(import.meta.url)("apache-arrow") as typeof import("apache-arrow");
