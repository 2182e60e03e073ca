#!/usr/bin/env python3
"""Prints the table of results/hosts/README.md from the committed run folders'
summary.json files (python3 results/hosts/table.py, from the repository root)."""
import glob
import json
import os
import re

here = os.path.dirname(os.path.abspath(__file__))
order = {"here": 0, "one-agent": 1, "two-agents": 2}
rows = []
for d in glob.glob(os.path.join(here, "2026*")):
    m = re.search(r"hosts-(here|one-agent|two-agents)-(\d+)$", d)
    s = json.load(open(os.path.join(d, "db-timer", "summary.json")))
    g, cpu = s["generator"], s.get("cpu") or {}
    by = cpu.get("by_service", {})
    rows.append((int(m.group(2)), m.group(1), os.path.basename(d), g, cpu, by, sum(s["anomalies"].values())))
rows.sort(key=lambda r: (r[0], order[r[1]]))
print("| rate /s | generator | run | created / planned | lag to commit p50 / p99 ms | machine busy "
      "| delaybench CPU (cores) | PostgreSQL CPU (cores) | anomalies |")
print("|---|---|---|---|---|---|---|---|---|")
for rate, where, run, g, cpu, by, anomalies in rows:
    print(f"| {rate} | {where} | [{run}]({run}) | {g['created']} / {g['orders_planned']} "
          f"| {g['lag_us_p50'] / 1000:.1f} / {g['lag_us_p99'] / 1000:.1f} "
          f"| {cpu.get('machine_busy', 0) * 100:.0f} % "
          f"| {by.get('delaybench (harness + workers)', 0):.2f} | {by.get('postgresql', 0):.2f} "
          f"| {anomalies} |")
