#!/usr/bin/env python3
"""The test command's last words (scripts/test.sh): what ran and what did not.

Reads the record scripts/lib.sh keeps in a results folder while the lanes run:
  lanes          one line per lane: NAME STATUS SECONDS FOLDER (STATUS: an exit code, or "off" with the switch that
                 turned it off, SECONDS then being the variable's setting)
  NAME.xml       the lane's CTest JUnit report (ctest --output-junit), when the lane ran CTest
  NAME.excluded  tests the lane leaves out on purpose: "TEST<TAB>REASON" per line
  configure.log  the configure step's output of build/ (its "Torus:" lines say what the build left out)
and prints each lane with its counts, every skipped test with its reason (GoogleTest's GTEST_SKIP message, grouped
by reason), every test left out or not run, each lane switched off, and the configure step's messages.
Exit status 0; the shell decides the command's own.
"""
import collections
import os
import re
import sys
import textwrap
import xml.etree.ElementTree as ET

WIDTH = 118


def skip_reason(output, message):
    """GoogleTest prints `FILE:LINE: Skipped` then the GTEST_SKIP message, up to `[  SKIPPED ]`."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.endswith(": Skipped"):
            reason = []
            for follow in lines[i + 1:]:
                if follow.startswith("[  SKIPPED ]"):
                    break
                if follow.strip():
                    reason.append(follow.strip())
            return " ".join(reason) or "(GTEST_SKIP without a message)"
    return message or "(no reason given)"


def short_name(name):
    """A parameterized test's name without the GetParam() dump CTest carries, keeping an ISA suffix (".AVX2")."""
    m = re.match(r"(.*?)  # GetParam\(\) = .*?((?:\.[A-Z][A-Z0-9_]*)?)$", name, re.S)
    return m.group(1) + m.group(2) if m else name


def read_junit(path):
    """Test name -> (outcome, detail): outcome is passed, failed, skipped or not run."""
    outcomes = {}
    if not os.path.exists(path):
        return outcomes
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return {f"(unreadable report {path}: {e})": ("failed", "")}
    for case in root.iter("testcase"):
        name = short_name(case.get("name", "?"))
        status = case.get("status", "")
        output = case.findtext("system-out") or ""
        skipped = case.find("skipped")
        if status == "run":
            outcomes[name] = ("passed", "")
        elif status == "fail":
            outcomes[name] = ("failed", "")
        elif skipped is not None and skipped.get("message") == "SKIP_REGULAR_EXPRESSION_MATCHED":
            outcomes[name] = ("skipped", skip_reason(output, ""))
        else:
            message = skipped.get("message", "") if skipped is not None else status
            outcomes[name] = ("not run", message or status or "not run")
    return outcomes


def wrapped(prefix, names):
    return textwrap.fill(", ".join(sorted(names)), WIDTH, initial_indent=prefix, subsequent_indent="      ")


def summarize(results):
    out = ["", "=" * 30 + " torus: what ran and what did not " + "=" * 30]
    configure = os.path.join(results, "configure.log")
    if os.path.exists(configure):
        with open(configure) as f:
            said = [line.strip()[3:] for line in f if line.startswith("-- Torus:")]
        out += [f"configure (build/): {line}" for line in said]
    else:
        out.append("configure (build/): no record of the configure step (configured before this record was kept)")
    lanes_file = os.path.join(results, "lanes")
    lanes = []
    if os.path.exists(lanes_file):
        with open(lanes_file) as f:
            lanes = [line.strip().split(maxsplit=3) for line in f if line.strip()]
    if not lanes:
        out.append("no lane ran (the command stopped before the first: see the build's output above)")
    failed_lanes = []
    skipped = collections.defaultdict(lambda: collections.defaultdict(list))  # lane -> reason -> tests
    problems = []
    for fields in lanes:
        name, status, seconds = fields[0], fields[1], fields[2]
        folder = fields[3] if len(fields) > 3 else ""
        if status == "off":
            out.append(f"lane {name}: OFF, not run ({seconds})")
            continue
        outcomes = read_junit(os.path.join(results, name + ".xml"))
        counts = collections.Counter(outcome for outcome, _ in outcomes.values())
        verdict = "passed" if status == "0" else f"FAILED (exit {status})"
        if status != "0":
            failed_lanes.append(name)
        detail = ""
        if outcomes:
            detail = (f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
                      + (f", {counts['not run']} not run" if counts["not run"] else "") + ", ")
        out.append(f"lane {name} ({folder}): {verdict}: {detail}{int(seconds) // 60} min {int(seconds) % 60} s")
        for test, (outcome, why) in sorted(outcomes.items()):
            if outcome == "skipped":
                skipped[name][why].append(test)
            elif outcome in ("failed", "not run"):
                problems.append(f"  {name}: {test}: {outcome}" + (f" ({why})" if why and why != outcome else ""))
        excluded = os.path.join(results, name + ".excluded")
        if os.path.exists(excluded):
            by_reason = collections.defaultdict(list)
            with open(excluded) as f:
                for line in f:
                    if "\t" in line:
                        test, why = line.rstrip("\n").split("\t", 1)
                        by_reason[why].append(test)
            for why, tests in by_reason.items():
                out.append(textwrap.fill(f"left out of lane {name} ({len(tests)}): {why}", WIDTH, initial_indent="  ",
                                         subsequent_indent="    "))
                out.append(wrapped("      ", tests))
    total_skipped = sum(len(t) for reasons in skipped.values() for t in reasons.values())
    out.append(f"skipped tests ({total_skipped}), by lane and reason:" if total_skipped else "skipped tests: none")
    for lane, reasons in skipped.items():
        for why, tests in sorted(reasons.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            out.append(textwrap.fill(f"{lane} ({len(tests)}): {why}", WIDTH, initial_indent="  ", subsequent_indent="    "))
            out.append(wrapped("      ", tests))
    out.append(f"failed or not run ({len(problems)}):" if problems else "failed or not run: none")
    out += problems
    ran = [f for f in lanes if f[1] != "off"]
    if failed_lanes:
        out.append("result: FAILED in lane(s) " + ", ".join(failed_lanes))
    elif ran:
        out.append(f"result: every lane that ran passed ({len(ran)} of {len(lanes)})")
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: test_summary.py RESULTS_DIR", file=sys.stderr)
        return 2
    print("\n".join(summarize(sys.argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
