#!/usr/bin/env python3
"""Lateness of a `redis-cluster` preset run, split by master: the orders
whose deadline fell inside the fault window, on the killed master's shards
and on the live masters' shards.

    scripts/redis-cluster-lateness.py RUN_DIR [STRATEGY ...]

The fault window is the run-command fault's start and finish in
RUN_DIR/<strategy>/summary.json; the orders come from the strategy's
PostgreSQL schema (its `namespace`, kept until `delaybench clean`), read
with psql on the run's database URL. An order's shard is redis-zset's own
hash (strategies/src/redis_zset/conn.rs, `shard_of`). With the default 4
shards, `spread_tag` puts shard k's slot within 1/8 of a slice of the middle
of the k-th quarter of the slot space (2048, 6144, 10240, 14336), so on the
three equal ranges of `redis-cli --cluster create` shards 1 and 2 are on
the second master, 7001, which the preset kills (KILLED_SHARDS overrides).
"""
import json
import os
import subprocess
import sys

M = (1 << 64) - 1
SHARDS = 4
KILLED = {int(k) for k in os.environ.get("KILLED_SHARDS", "1,2").split(",")}


def shard_of(order_id, shards=SHARDS):
    z = (order_id + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    z ^= z >> 31
    return z % shards


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] if values else None


def main():
    run_dir = sys.argv[1]
    run = json.load(open(os.path.join(run_dir, "run.json")))
    for strategy in sys.argv[2:] or run["strategies"]:
        summary = json.load(open(os.path.join(run_dir, strategy, "summary.json")))
        fault = next(f for f in summary["faults"] if f["kind"] == "run-command")
        sql = (
            "select id, status, created_at_us, expire_at_us, coalesce(cancelled_at_us, -1) "
            f"from {summary['database']['namespace']}.orders"
        )
        out = subprocess.check_output(
            ["psql", run["database_url"], "-At", "-F", ",", "-c", sql]
        ).decode()
        rows = [tuple(line.split(",")) for line in out.split()]
        rows = [(int(i), s, int(c), int(e), int(x)) for i, s, c, e, x in rows]
        # The run's clock starts with the first order (the warm-up included).
        t0 = min(r[2] for r in rows)
        lo = t0 + fault["planned_at_ms"] * 1000
        hi = t0 + fault["finished_at_ms"] * 1000
        print(f"{strategy}: deadlines from {fault['planned_at_ms']} to {fault['finished_at_ms']} ms")
        for name, on_killed in (("killed master's shards", True), ("live masters' shards", False)):
            due = [r for r in rows if lo <= r[3] <= hi and (shard_of(r[0]) in KILLED) == on_killed]
            late = [(r[4] - r[3]) / 1000 for r in due if r[1] == "CANCELLED"]
            pending = sum(1 for r in due if r[1] == "PENDING")
            show = lambda v: "-" if v is None else f"{v:.1f}"
            print(
                f"  {name:24} due {len(due):4}  cancelled {len(late):4}  pending {pending:4}  "
                f"lateness ms p50 {show(pct(late, .5))}  p90 {show(pct(late, .9))}  "
                f"max {show(max(late) if late else None)}"
            )


if __name__ == "__main__":
    main()
