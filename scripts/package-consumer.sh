#!/usr/bin/env bash
# Packages every crate meant for publishing (`cargo package`), unpacks the `.crate` files,
# builds each from its unpacked folder (its own tests for the crates that ship them, a build of
# `burn-route`: what `cargo package`'s verification would do, in the shared target directory
# instead of one of its own, so no dependency is compiled twice), and builds a copy of `examples/downstream` outside this repository
# against those packages only: `[patch.crates-io]` names the unpacked folders, nothing names a
# path inside the repository. The copy's tests run with default features, with
# `--no-default-features`, and with `wgpu` (lavapipe without a GPU).
#
# Usage (from anywhere): scripts/package-consumer.sh [WORK_DIR]
#
# WORK_DIR (default: a temporary directory, removed on exit) receives `crates/` (the unpacked
# packages) and `downstream/` (the consumer). The consumer builds in this repository's target
# directory, so the Burn crates compiled by earlier builds of the same features are reused; its
# Cargo.toml gets the repository's dev profile for the same reason (a consumer's own profile
# would rebuild every dependency, nothing else changes).
#
# SKIP_WGPU=1 leaves out the `wgpu` configuration.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

if [[ $# -ge 1 ]]; then
    work=$1
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')

# Every publishable crate: the vocabulary, the runtime, the generator, its command line, and
# the crate of the shipped ops. `cargo package` verifies each by building it from its package.
packages=(burn-route-core burn-route-runtime burn-route-codegen burn-route-cli burn-route)
args=()
for p in "${packages[@]}"; do args+=(-p "$p"); done
# No verification build here: the unpacked packages are built below.
cargo package --no-verify "${args[@]}"

rm -rf "$work/crates" "$work/downstream"
mkdir -p "$work/crates"
for p in "${packages[@]}"; do
    crate=$(ls "$target_dir/package/$p"-[0-9]*.crate | sort -V | tail -n 1)
    tar -xzf "$crate" -C "$work/crates"
done
# Unpacked files keep their packaged mtimes: without this, a test binary built from an earlier
# WORK_DIR (its CARGO_MANIFEST_DIR compiled in) would look fresh and be reused.
find "$work/crates" -type f -exec touch {} +

# The unpacked folder of a package (`NAME-VERSION`).
unpacked() { ls -d "$work/crates/$1"-[0-9]* | sort -V | tail -n 1; }

# The packages' own tests, run from the unpacked packages (a workspace around them that only
# patches crates.io to the unpacked folders): what a package ships must pass on its own.
{
    echo "[workspace]"
    echo "resolver = \"3\""
    echo "members = ["
    for p in burn-route-core burn-route-runtime burn-route-codegen burn-route-cli burn-route; do
        echo "    \"$(basename "$(unpacked "$p")")\","
    done
    echo "]"
    echo
    echo "[patch.crates-io]"
    for p in burn-route-core burn-route-runtime burn-route-codegen; do
        echo "$p = { path = \"$(unpacked "$p")\" }"
    done
    echo
    sed -n '/^\[profile\.dev\]/,/^$/p; /^\[profile\.dev\.package\."\*"\]/,/^$/p' Cargo.toml
} >"$work/crates/Cargo.toml"
cp Cargo.lock "$work/crates/Cargo.lock"
echo "== the packages' own tests, from the unpacked packages"
(
    cd "$work/crates"
    export CARGO_TARGET_DIR=$target_dir
    cargo test -p burn-route-core -p burn-route-codegen --all-features
    cargo test -p burn-route-cli
    cargo test -p burn-route-runtime
    # The shipped ops: its build script renders ops.toml from the package's own files.
    cargo build -p burn-route
)

# The consumer: examples/downstream as a user would copy it, plus what ties it to the packages.
cp -r examples/downstream "$work/downstream"
cp Cargo.lock "$work/downstream/Cargo.lock"
{
    echo
    echo "# Added by scripts/package-consumer.sh: a workspace of its own, the unpacked packages"
    echo "# in place of crates.io, and the repository's dev profile (shared target directory)."
    echo "[workspace]"
    echo
    echo "[patch.crates-io]"
    for p in burn-route-core burn-route-runtime burn-route-codegen; do
        echo "$p = { path = \"$(unpacked "$p")\" }"
    done
    echo
    sed -n '/^\[profile\.dev\]/,/^$/p; /^\[profile\.dev\.package\."\*"\]/,/^$/p' Cargo.toml
} >>"$work/downstream/Cargo.toml"
if grep -rn --include=Cargo.toml "$repo" "$work/downstream" >/dev/null; then
    echo "error: the consumer names a path inside the repository" >&2
    exit 1
fi

cd "$work/downstream"
export CARGO_TARGET_DIR=$target_dir
echo "== consumer: default features"
cargo test
echo "== consumer: --no-default-features"
cargo test --no-default-features
if [[ ${SKIP_WGPU:-0} != 1 ]]; then
    echo "== consumer: --features wgpu"
    cargo test --features wgpu
fi
