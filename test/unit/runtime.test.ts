// Which uWS build each runtime gets, and the one-line refusal for the rest.
import { describe, expect, it } from "vitest";
import { SUPPORTED_RUNTIMES, currentRuntime, loadUws, uwsPackageFor, type Runtime } from "../../src/util/runtime.js";

const linux = (node: string, glibc: string | null = "2.36"): Runtime => ({ node, platform: "linux", arch: "x64", glibc });

describe("runtime", () => {
  it("Node 20.11+ and 22 get uws-pack, Node 24 gets the uWS 20.57 build", () => {
    expect(uwsPackageFor(linux("v20.20.2"))).toBe("uws-pack");
    expect(uwsPackageFor(linux("v22.23.3", "2.27"))).toBe("uws-pack");
    expect(uwsPackageFor({ node: "v22.1.0", platform: "darwin", arch: "arm64", glibc: null })).toBe("uws-pack");
    expect(uwsPackageFor(linux("v24.21.0", "2.39"))).toBe("@btc-vision/uwebsockets.js");
  });

  it.each([
    [linux("v18.19.0"), "no uWebSockets.js build for Node 18.19"],
    [linux("v20.9.0"), "no uWebSockets.js build for Node 20.9"],
    [linux("v23.0.0"), "no uWebSockets.js build for Node 23.0"],
    [linux("v24.21.0", "2.36"), "the Node 24 binary needs glibc >= 2.38"],
    [linux("v22.23.3", "2.17"), "the Node 22 binary needs glibc >= 2.27"],
    [linux("v22.23.3", null), "musl is not supported"],
    [{ node: "v22.23.3", platform: "freebsd", arch: "x64", glibc: null }, "no uWebSockets.js build for freebsd-x64"],
  ])("%o is refused in one line that names the runtimes that work", (r, why) => {
    let message = "";
    try {
      uwsPackageFor(r);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain(why);
    expect(message).toContain(SUPPORTED_RUNTIMES);
    expect(message).not.toContain("\n");
  });

  it("this runtime loads a native uWS", async () => {
    expect(currentRuntime().node).toBe(process.version);
    const uws = await loadUws();
    expect(typeof uws.App).toBe("function");
  });
});
