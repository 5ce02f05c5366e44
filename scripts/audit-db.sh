#!/usr/bin/env bash
# Refreshes the vendored RustSec advisory database snapshot (audit/advisory-db.tar.gz) that
# scripts/audit.sh checks Cargo.lock against: CI reaches the package registries only, so the
# database cannot be fetched at test time.
#
#   bash scripts/audit-db.sh            # clones https://github.com/rustsec/advisory-db (needs GitHub)
#   bash scripts/audit-db.sh GIT_DIR    # packs HEAD of a clone already on disk
#
# Packs only what the audit reads, `crates/` (the advisories for crates.io crates; `rust/`
# holds the toolchain's own), with the database's LICENSE.txt (CC0) and a SNAPSHOT file
# naming the commit and its date; `git archive` makes the same bytes from the same commit.
# Then rewrites the "Snapshot:" line of audit/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

src=${1:-}
tmp=
if [ -z "$src" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    git clone -q --bare --depth 1 https://github.com/rustsec/advisory-db "$tmp/advisory-db.git"
    src=$tmp/advisory-db.git
fi
if [ -d "$src/.git" ]; then
    src=$src/.git
fi

commit=$(git --git-dir="$src" rev-parse HEAD)
date=$(git --git-dir="$src" show -s --format=%cI HEAD)
git --git-dir="$src" archive --format=tar.gz --prefix=advisory-db/ \
    --add-virtual-file="advisory-db/SNAPSHOT:commit $commit
date $date
" HEAD crates LICENSE.txt >audit/advisory-db.tar.gz.new
mv audit/advisory-db.tar.gz.new audit/advisory-db.tar.gz

line="Snapshot: [rustsec/advisory-db](https://github.com/rustsec/advisory-db) commit $commit of ${date%%T*}."
sed -i "s|^Snapshot: .*|$line|" audit/README.md
echo "audit/advisory-db.tar.gz: $(tar -xzOf audit/advisory-db.tar.gz advisory-db/SNAPSHOT | tr '\n' ' ')($(tar -tzf audit/advisory-db.tar.gz | grep -c '\.md$') advisories, $(wc -c <audit/advisory-db.tar.gz) bytes)"
