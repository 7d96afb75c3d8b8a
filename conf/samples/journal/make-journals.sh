#!/bin/sh
# The journal variant of the sample kernel logs: each remote-<host>[@<rotation>].export beside this script holds a
# host's kernel lines in the Journal Export Format; systemd-journal-remote (Debian: apt-get install
# systemd-journal-remote) writes each as <dir>/remote-<host>[@<rotation>].journal, as it writes a node's files with
# --split-mode=host (an `@` name is an archived file).
#   sh conf/samples/journal/make-journals.sh /tmp/sample-journals
set -eu
out=${1:?usage: make-journals.sh DIR}
receiver=${SYSTEMD_JOURNAL_REMOTE:-/lib/systemd/systemd-journal-remote}
here=$(dirname "$0")
mkdir -p "$out"
for export in "$here"/*.export; do
    name=$(basename "$export" .export)
    rm -f "$out/$name.journal"
    "$receiver" --output="$out/$name.journal" - < "$export" 2>/dev/null
done
echo "$out: $(ls "$out" | grep -c '\.journal$') journal files"
