// Azurite for tests: the bench's launcher (bench/azurite.ts), one implementation.
export * from "../../bench/azurite.js";
