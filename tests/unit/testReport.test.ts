import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { countsOf, failuresOf } from "../run.ts";

// Shaped like the report `bun test --reporter=junit` writes, with one synthetic case as tests/run.ts adds.
const file = join(process.cwd(), "tests/x.test.ts");
const REPORT = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="bun test" tests="4">
  <testsuite name="${file}" file="${file}" tests="3">
    <testsuite name="grp" file="${file}" line="2" tests="3">
      <testcase name="one &quot;fails&quot;" classname="grp" time="0.1" file="${file}" line="2" assertions="1">
        <failure type="AssertionError" message="expect(received).toBe(expected)&#10;&#10;Expected: 2&#10;Received: 1&#10;">AssertionError: …</failure>
      </testcase>
      <testcase name="ok" classname="grp" time="0.1" file="${file}" line="3" assertions="1" />
      <testcase name="later" classname="grp" time="0" file="${file}" line="4"><skipped /></testcase>
      <testcase name="passes" classname="grp" time="0.1" file="${file}" line="5" assertions="1" />
      <testcase name="fails after a pass" classname="grp" time="0.1" file="${file}" line="6">
        <failure type="Error" message="boom">Error: boom</failure>
      </testcase>
    </testsuite>
  </testsuite>
  <testsuite name="postgres: outside tests" tests="1" failures="1">
    <testcase name="bun test exited with 1" classname="postgres: outside tests"><failure message="bun test exited with 1: 1 failure(s) outside any test" /></testcase>
  </testsuite>
</testsuites>
`;

describe("the test run's report", () => {
  test("counts passed, failed and skipped cases", () => {
    expect(countsOf(REPORT)).toEqual({ passed: 2, failed: 3, skipped: 1 });
  });

  test("names each failure with its file, group and message on one line", () => {
    expect(failuresOf(REPORT)).toEqual([
      'tests/x.test.ts > grp > one "fails": expect(received).toBe(expected) Expected: 2 Received: 1',
      // Not "passes", the self-closing case before it.
      "tests/x.test.ts > grp > fails after a pass: boom",
      "postgres: outside tests > bun test exited with 1: bun test exited with 1: 1 failure(s) outside any test",
    ]);
  });
});
