#!/usr/bin/env bash
# Fails when git tracks what a source repository should not hold: a file
# over 1 MiB, or an executable that is not a script (the executable bit,
# or an ELF, Mach-O or PE header, without a leading "#!"). Build outputs
# belong in .gitignore; CI (.ci/run) runs this first.
#   scripts/check-tracked.sh
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))
bad=0

# Sizes and modes from the index, so that what is checked is what a
# commit holds, whatever the working tree's permissions.
while read -r oid size mode path; do
  if [ "$size" -gt "$limit" ]; then
    echo "tracked file over 1 MiB: $path ($size bytes)"
    bad=1
  fi
  # head closes the pipe early: git's SIGPIPE is no failure here.
  head=$({ git cat-file blob "$oid" || true; } | head -c 4 | od -An -tx1 | tr -d ' \n')
  case "$head" in
    2321*) continue ;; # "#!": a script
    7f454c46) kind="an ELF binary" ;;
    feedface | feedfacf | cefaedfe | cffaedfe | cafebabe) kind="a Mach-O binary" ;;
    4d5a*) kind="a PE (Windows) binary" ;;
    *) kind="" ;;
  esac
  if [ -z "$kind" ] && [ "$mode" = 100755 ]; then
    kind="executable without a #! line"
  fi
  if [ -n "$kind" ]; then
    echo "tracked file is $kind: $path"
    bad=1
  fi
done < <(git ls-files -s | awk -F'\t' '{split($1, m, " "); print m[2], m[1], $2}' |
  git cat-file --batch-check='%(objectname) %(objectsize) %(rest)')

if [ "$bad" -ne 0 ]; then
  echo "Remove these from git (git rm --cached) and ignore build outputs in .gitignore."
  exit 1
fi
echo "tracked files: no binaries, none over 1 MiB"
