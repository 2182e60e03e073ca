#!/usr/bin/env bash
# Renders a run folder's report.html in headless Chromium and saves a
# screenshot, to check by eye that the page and its plots render.
# Usage: scripts/screenshot.sh RUN_DIR OUT.png
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 RUN_DIR OUT.png" >&2
  exit 2
fi
page="$(realpath "$1")/report.html"
if [ ! -f "$page" ]; then
  echo "$page not found: run \`delaybench report $1\` first" >&2
  exit 1
fi
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  echo "chromium not found: apt-get install -y chromium" >&2
  exit 1
fi
out="$(realpath -m "$2")"
# --no-sandbox: Chromium refuses its sandbox as root (CI containers).
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --screenshot="$out" --window-size=1400,4000 "file://$page"
[ -s "$out" ] || { echo "no screenshot written to $out" >&2; exit 1; }
echo "$out"
