"""Where a grade's time went, from its call log (grader/sandbox/calllog.py).

    make grade-gpu IMPL=solutions ARGS="--call-log /tmp/calls.jsonl"
    python3 -m tools.call_costs /tmp/calls.jsonl

Prints, per exercise (with --by-check: per check) and mode, the seconds of worker starts, calls
by kind (the keys of their options: a timed `runs` request, a `trace` gate, a fetch), replays
and the trusted side's own spans (verification, baselines, stopping workers), largest first.
"""

from __future__ import annotations

import argparse
import collections
import json


def kind(line: dict) -> str:
    if line["event"] != "call":
        return line["event"]
    opts = [o for o in line.get("opts", []) if o != "cuda_peak"]
    return "call " + ("+".join(opts) or "plain")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--by-check", action="store_true",
                        help="seconds per check and kind of event instead of per exercise")
    args = parser.parse_args(argv)
    totals = collections.defaultdict(lambda: [0, 0.0])
    with open(args.log) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    for line in lines:
        first = (line.get("check") or "-") if args.by_check else (line.get("exercise") or "-")
        key = (first, line["mode"], kind(line))
        totals[key][0] += 1
        totals[key][1] += line["s"]
    if lines:
        wall = max(x["end"] for x in lines) - min(x["end"] - x["s"] for x in lines)
        print(f"{len(lines)} events over {wall:.1f} s of wall")
    width = 40 if args.by_check else 20
    print(f"{'check' if args.by_check else 'exercise':<{width}}{'mode':<9}{'what':<26}{'count':>6}"
          f"{'seconds':>10}")
    for (ex, mode, what), (n, s) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{ex:<{width}}{mode:<9}{what:<26}{n:>6}{s:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
