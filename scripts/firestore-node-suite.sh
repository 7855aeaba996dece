#!/usr/bin/env bash
# Runs the Node.js Firestore client's own system tests (googleapis/nodejs-firestore,
# over gRPC) against the Firestore emulator of emulators/firestore:
#   scripts/firestore-node-suite.sh [checkout]
# checkout is a nodejs-firestore working tree (default: a clone of the tag
# $NODE_FIRESTORE_TAG, v8.3.0, in a temporary directory). Its dependencies are
# installed with npm and it is compiled if it has no build/. The emulator is
# built from this tree and served on 127.0.0.1 only.
#
# It runs the specs that can run against an emulator: firestore.js and
# query.js. pipeline.js is left out as it skips every test (pipelines are
# Enterprise only), and so is tracing.js: it asserts the production host in
# its spans and reads them back from Cloud Trace with Google credentials. Prints each failure and,
# last, "N passed, M failed, K skipped"; exits non-zero if any failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tag=${NODE_FIRESTORE_TAG:-v8.3.0}
port=${PORT:-18930}
tmp=$(mktemp -d)
emu=
cleanup() {
  if [ -n "$emu" ]; then kill "$emu" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

dir=${1:-}
if [ -z "$dir" ]; then
  dir=$tmp/nodejs-firestore
  git clone -q --depth 1 --branch "$tag" https://github.com/googleapis/nodejs-firestore "$dir"
fi
cd "$dir"
[ -d node_modules ] || npm install --ignore-scripts --no-audit --no-fund >"$tmp/npm.log" 2>&1 || { cat "$tmp/npm.log" >&2; exit 1; }
if [ ! -d build/system-test ]; then
  # Library type checks are skipped: the release's lock-free dependency ranges
  # pull @types/sinon and @sinonjs/fake-timers versions that disagree.
  npx tsc -p . --skipLibCheck
  npm run -s postcompile >/dev/null
fi

(cd "$root" && go build -o "$tmp/firestore-emulator" ./emulators/firestore/cmd/firestore-emulator)
"$tmp/firestore-emulator" -addr "127.0.0.1:$port" 2>"$tmp/emulator.log" &
emu=$!
sleep 1

status=0
MOCHA_THROW_DEPRECATION=false FIRESTORE_EMULATOR_HOST=127.0.0.1:$port GCLOUD_PROJECT=test-project \
  MOCHA_REPORTER=json MOCHA_REPORTER_OUTPUT="$tmp/result.json" \
  npx mocha build/system-test/firestore.js build/system-test/query.js \
  --timeout 1200000 >"$tmp/mocha.log" 2>&1 || status=$?
[ -f "$tmp/result.json" ] || { cat "$tmp/mocha.log" >&2; exit 1; }
node -e '
const r = require(process.argv[1]);
for (const f of r.failures) console.log("FAIL", f.fullTitle, "::", (f.err.message || "").split("\n")[0]);
console.log(`${r.stats.passes} passed, ${r.stats.failures} failed, ${r.stats.pending} skipped`);
' "$tmp/result.json"
exit "$status"
