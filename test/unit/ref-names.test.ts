// The one rule for branch and tag names (Lance's, with dot segments refused) and the second line of
// defence behind it: paths joined from a name are checked to stay inside the table's directory.
import { describe, expect, it } from "vitest";
import { branchNameFault, branchTreePath, tagNameFault } from "../../src/util/ref-names.js";
import { joinInside } from "../../src/util/store-files.js";

describe("branch names", () => {
  it("Lance's legal names stay legal, hierarchies and other scripts included", () => {
    for (const name of ["main", "feature/login", "bugfix/issue-123", "release/v1.2.3", "user/someone/my-feature", "with.dot", ".hidden", "ветка/αβ", "数据"]) {
      expect(branchNameFault(name), name).toBeNull();
    }
  });

  it("empty, dot and dot-dot segments, absolute paths, backslashes, NUL and Lance's own refusals are faults", () => {
    for (const name of ["", ".", "..", "a/.", "./a", "a/..", "../x", "a/../../b", "/abs", "a/", "a//b", "a\\b", "a\u0000b", "a..b", "x.lock", "a b", "a@b"]) {
      expect(branchNameFault(name), JSON.stringify(name)).not.toBeNull();
    }
    expect(branchNameFault("a/..")).toMatch(/^"a\/\.\." has a "\.\." segment; a branch is /);
  });

  it("branchTreePath answers tree/<name> and refuses what leaves tree/ with a 400", () => {
    expect(branchTreePath("feature/login")).toBe("tree/feature/login");
    expect(() => branchTreePath("../../__manifest")).toThrow(expect.objectContaining({ status: 400 }));
  });
});

describe("tag names", () => {
  it("follow Lance's tag rule: no '/', no dot at either end, no '..'", () => {
    for (const ok of ["v1", "v1.2.3-rc4", "ref_with_underscores"]) expect(tagNameFault(ok), ok).toBeNull();
    for (const bad of ["", "../x", ".x", "x.", "a/b", "a..b", "x.lock", "a\\b"]) expect(tagNameFault(bad), bad).not.toBeNull();
  });
});

describe("joinInside", () => {
  it("joins a path that stays below the directory", () => {
    expect(joinInside("/data/t.lance", "tree/a/_versions")).toBe("/data/t.lance/tree/a/_versions");
    expect(joinInside("az://c/p/t.lance", "tree/a/_versions")).toBe("az://c/p/t.lance/tree/a/_versions");
  });

  it("refuses, with a 400, one that leaves it or names it itself, locally and on an object store", () => {
    for (const rel of ["../other.lance/_versions", "tree/../../__manifest", "..", "", ".", "a\u0000b"]) {
      expect(() => joinInside("/data/t.lance", rel), JSON.stringify(rel)).toThrow(expect.objectContaining({ status: 400 }));
    }
    for (const rel of ["../other.lance", "tree/./a", "tree//a", "a/.."]) {
      expect(() => joinInside("s3://b/p/t.lance", rel), rel).toThrow(expect.objectContaining({ status: 400 }));
    }
  });
});
