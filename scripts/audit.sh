#!/usr/bin/env bash
# The dependency audit (issue 32): every crate that Cargo.lock builds checked against the
# RustSec advisory database with cargo-deny (`cargo deny check advisories`, configured by
# audit/deny.toml). The database is the snapshot vendored in audit/advisory-db.tar.gz
# (refreshed with scripts/audit-db.sh), made into the git repository cargo-deny expects in
# a temporary directory; cargo-deny runs --offline, so it never fetches it. Installs
# cargo-deny (cargo install --locked, from crates.io) when missing. Prints the snapshot's
# age; exits non-zero on a vulnerability advisory only (unmaintained, unsound and yanked
# crates are printed as warnings), never for the snapshot's age.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.20.2
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if [ "$(cargo deny --version 2>/dev/null)" != "cargo-deny $version" ]; then
    echo "== installing cargo-deny $version (cargo install --locked, from crates.io)"
    cargo install --locked --quiet cargo-deny --version "$version"
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# cargo-deny keeps each database in <db-path>/<last url segment>-<hash of the url>: this is
# the one for audit/deny.toml's db-urls (cargo-deny 0.20's XxHash64 of it).
db=$root/advisory-db-3157b0e258782691
mkdir -p "$db"
tar -xzf audit/advisory-db.tar.gz -C "$db" --strip-components=1
commit=$(sed -n 's/^commit //p' "$db/SNAPSHOT")
date=$(sed -n 's/^date //p' "$db/SNAPSHOT")
(
    unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY
    cd "$db"
    git init -q -b main
    git add -A
    GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date git -c user.name=audit \
        -c user.email=audit@localhost -c commit.gpgsign=false commit -q -m "advisory-db $commit"
)
age=$((($(date +%s) - $(date -d "$date" +%s)) / 86400))
echo "== advisory database: rustsec/advisory-db ${commit:0:12} of ${date%%T*}, $age days old" \
    "($(find "$db/crates" -name '*.md' | wc -l) advisories; bash scripts/audit-db.sh refreshes it)"

# cargo-deny's --offline also keeps `cargo metadata` offline: the crates come first.
cargo fetch --locked --quiet
COALLOC_AUDIT_DB_ROOT=$root cargo deny --offline --locked --config audit/deny.toml check -s \
    --warn unmaintained --warn unsound --warn yanked advisories
