#!/usr/bin/env bash
# Rebuild time and generated code size: burn-route's build-script generator vs Burn's
# `#[backend_extension]` proc-macro, on synthetic crates with N two-input differentiable ops.
#
# Usage (from the repository root): scripts/rebuild-timing.sh
#
# In a temporary directory (removed on exit) it generates three crates that share one
# CARGO_TARGET_DIR, so dependencies build once per feature set:
#
#   R10, R200  depend on burn-route-runtime (this checkout, default features) and use burn-route-codegen
#              from build.rs; ops.toml declares N ops `op_i(lhs, rhs) -> float`,
#              autodiff = "differentiable", backends ["Flex"].
#   P200       declares the same 200 ops on a trait with `#[backend_extension(Flex, Autodiff)]`,
#              depending on `burn` (std, flex, autodiff, extension).
#
# Every crate has the same kernels: `Flex` and `Autodiff<B, C>` both call `float_add` through the
# backend (`Autodiff<B, C>`'s own `float_add` records the gradient). P200 gets no `Tensor<D>`
# wrappers, while the R crates also compile their generated `Tensor<D>` layer.
#
# After one warm-up build per crate (dev profile), it times `cargo build` with CARGO_INCREMENTAL=0
# after each trigger, in RUNS rounds (default 3) that interleave the triggers, and prints the
# medians:
#
#   R  `touch ops.toml`   the build script must re-run (checked in `cargo build -v`)
#   R  `touch src/lib.rs` the build script must NOT re-run (checked), only the crate recompiles
#   P  `touch src/lib.rs` the proc-macro re-expands with any change to the crate
#
# Then the generated lines per op:
#
#   R  (lines(R200) - lines(R10)) / 190 over the three files in OUT_DIR
#   P  (lines(P200 expanded) - lines(P200 without the attribute, expanded)) / 200, from the exact
#      rustc command cargo ran for P200 plus `-Zunpretty=expanded` (RUSTC_BOOTSTRAP=1 for that one
#      process only, so no dependency is rebuilt)
#
# BACKWARD=formulas: the R crates declare each op's backward pass in ops.toml instead
# (`backward = { lhs = "grad", rhs = "grad" }`, the gradient of an addition) and write no
# `Autodiff<B, C>` kernels: the generator writes them. P200 is unchanged (Burn's macro has no
# such form). Default: BACKWARD=hand, the R crates implement `BenchOpsAutodiff` by hand.
#
# Needs: cargo and rustc (stable), crates.io or a warm cargo cache, and a few GiB free under
# $TMPDIR. Every run starts from an empty target directory and builds Burn's crates twice (the
# `burn` facade changes features of shared dependencies, e.g. `hashbrown/serde`, so P200 cannot
# reuse the R crates' builds): about 7 minutes on 2 cores.

set -euo pipefail
shopt -s inherit_errexit

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rebuild-timing.XXXXXX")
# KEEP_WORK=1 keeps the crates (and their target directory) for a closer look.
if [[ ${KEEP_WORK:-0} == 1 ]]; then
    echo "== keeping $WORK"
else
    trap 'rm -rf "$WORK"' EXIT
fi

export CARGO_TARGET_DIR="$WORK/target"
export CARGO_INCREMENTAL=0
RUNS=${RUNS:-3} # rounds of timed rebuilds; the medians are over these
BACKWARD=${BACKWARD:-hand} # `hand` or `formulas`: how the R crates' ops get their backward pass

log() { printf '== %s\n' "$*" >&2; }

# Same dependency versions as this repository.
seed_lockfile() { cp "$REPO/Cargo.lock" "$1/Cargo.lock"; }

# One op's Rust kernel body, shared by every crate.
write_common_kernel_helper() {
    cat <<'RS'
/// The body of every kernel: `lhs + rhs` through the backend.
fn add<B: Backend>(lhs: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
    B::float_add(lhs, rhs)
}
RS
}

# gen_route_crate NAME N: a crate routed by burn-route.
gen_route_crate() {
    local name=$1 n=$2 dir="$WORK/$1" i
    mkdir -p "$dir/src"
    cat >"$dir/Cargo.toml" <<TOML
[package]
name = "$name"
version = "0.1.0"
edition = "2024"
publish = false

[workspace]

[features]
default = ["autodiff"]
# The generated code gates its autodiff routing on this crate's \`autodiff\` feature.
autodiff = ["burn-route-runtime/autodiff"]

[dependencies]
burn-route-runtime = { path = "$REPO/runtime" }

[build-dependencies]
burn-route-codegen = { path = "$REPO/codegen" }
TOML
    seed_lockfile "$dir"
    cat >"$dir/build.rs" <<'RS'
fn main() {
    burn_route_codegen::Builder::new("ops.toml").build_script();
}
RS
    {
        printf '[routing]\ntrait = "BenchOps"\nbackends = ["Flex"]\n'
        for ((i = 0; i < n; i++)); do
            printf '\n[[op]]\nname = "op_%d"\nautodiff = "differentiable"\n' "$i"
            printf 'inputs = [{ name = "lhs", tensor = "float" }, { name = "rhs", tensor = "float" }]\n'
            printf 'output = { tensor = "float" }\n'
            if [[ $BACKWARD == formulas ]]; then
                printf 'backward = { lhs = "grad", rhs = "grad" }\n'
            fi
        done
    } >"$dir/ops.toml"
    cat >"$dir/src/lib.rs" <<'RS'
//! Synthetic ops routed by burn-route.

pub mod ops {
    include!(concat!(env!("OUT_DIR"), "/routed_ops.rs"));
}

pub mod dispatch {
    include!(concat!(env!("OUT_DIR"), "/routed_dispatch.rs"));
}

pub mod tensor {
    include!(concat!(env!("OUT_DIR"), "/routed_tensor.rs"));
}

mod kernels;
RS
    {
        if [[ $BACKWARD == formulas ]]; then
            printf 'use burn_route_runtime::rt::{Backend, Flex, FloatTensor};\n\n'
            printf 'use crate::ops::BenchOps;\n\n'
        else
            printf 'use burn_route_runtime::rt::{Autodiff, Backend, CheckpointStrategy, Flex, FloatTensor};\n\n'
            printf 'use crate::ops::{BenchOps, BenchOpsAutodiff};\n\n'
        fi
        write_common_kernel_helper
        printf '\nimpl BenchOps for Flex {\n'
        for ((i = 0; i < n; i++)); do
            printf '    fn op_%d(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {\n        add::<Self>(lhs, rhs)\n    }\n' "$i"
        done
        printf '}\n'
        if [[ $BACKWARD != formulas ]]; then
            printf '\nimpl<B: BenchOps, C: CheckpointStrategy> BenchOpsAutodiff for Autodiff<B, C> {\n'
            for ((i = 0; i < n; i++)); do
                printf '    fn op_%d(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {\n        add::<Self>(lhs, rhs)\n    }\n' "$i"
            done
            printf '}\n'
        fi
    } >"$dir/src/kernels.rs"
}

# gen_proc_macro_crate NAME N [plain]: the same ops on a `#[backend_extension]` trait; with
# `plain`, without the attribute (the baseline for the expansion's size).
gen_proc_macro_crate() {
    local name=$1 n=$2 plain=${3:-} dir="$WORK/$1" i
    mkdir -p "$dir/src"
    cat >"$dir/Cargo.toml" <<TOML
[package]
name = "$name"
version = "0.1.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
burn = { version = "=0.23.0-pre.1", default-features = false, features = ["std", "flex", "autodiff", "extension"] }
TOML
    seed_lockfile "$dir"
    {
        printf '//! Synthetic ops routed by Burn'"'"'s `#[backend_extension]`.\n\n'
        printf 'use burn::backend::tensor::FloatTensor;\nuse burn::backend::{Backend, backend_extension};\n\n'
        printf 'mod kernels;\n\n'
        if [[ -z $plain ]]; then
            printf '#[backend_extension(Flex, Autodiff)]\n'
        fi
        printf 'pub trait BenchOps: Backend {\n'
        for ((i = 0; i < n; i++)); do
            printf '    fn op_%d(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;\n' "$i"
        done
        printf '}\n'
    } >"$dir/src/lib.rs"
    {
        printf 'use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;\n'
        printf 'use burn::backend::tensor::FloatTensor;\nuse burn::backend::{Autodiff, Backend, Flex};\n\n'
        printf 'use crate::BenchOps;\n\n'
        write_common_kernel_helper
        printf '\nimpl BenchOps for Flex {\n'
        for ((i = 0; i < n; i++)); do
            printf '    fn op_%d(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {\n        add::<Self>(lhs, rhs)\n    }\n' "$i"
        done
        printf '}\n\nimpl<B: BenchOps, C: CheckpointStrategy> BenchOps for Autodiff<B, C> {\n'
        for ((i = 0; i < n; i++)); do
            printf '    fn op_%d(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {\n        add::<Self>(lhs, rhs)\n    }\n' "$i"
        done
        printf '}\n'
    } >"$dir/src/kernels.rs"
}

# build_logged CRATE LOG: `cargo build -v` of the crate, output to LOG; prints the wall seconds.
build_logged() {
    local dir="$WORK/$1" logfile=$2 t0 t1
    t0=$(date +%s.%N)
    if ! (cd "$dir" && cargo build -v) >"$logfile" 2>&1; then
        tail -n 40 "$logfile" >&2
        echo "cargo build failed for $1 (log above)" >&2
        return 1
    fi
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}

ran_build_script() { grep -q 'build-script-build`' "$1"; }
recompiled() { grep -q -- "--crate-name $2 " "$1"; }

# one_run CRATE FILE EXPECT LOG: touch FILE in CRATE and rebuild, checking the build log; EXPECT
# is `script` (the build script must re-run), `no-script` (it must not) or `any`. Prints seconds.
one_run() {
    local crate=$1 file=$2 expect=$3 logfile=$4 secs
    touch "$WORK/$crate/$file"
    secs=$(build_logged "$crate" "$logfile")
    if ! recompiled "$logfile" "$crate"; then
        echo "$crate: touching $file did not recompile the crate" >&2
        return 1
    fi
    case $expect in
    script) ran_build_script "$logfile" || {
        echo "$crate: touching $file did not re-run the build script" >&2
        return 1
    } ;;
    no-script) if ran_build_script "$logfile"; then
        echo "$crate: touching $file re-ran the build script" >&2
        return 1
    fi ;;
    esac
    echo "$secs"
}

median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }

log "generating crates in $WORK"
gen_route_crate r10 10
gen_route_crate r200 200
gen_proc_macro_crate p200 200
gen_proc_macro_crate p200plain 200 plain

for crate in r10 r200 p200; do
    log "warm-up build of $crate (dependencies included)"
    build_logged "$crate" "$WORK/$crate-warmup.log" >/dev/null
done

# Rounds interleave the triggers, so a burst of load on a shared machine hits all of them alike.
TRIGGERS=("r10 ops.toml script" "r10 src/lib.rs no-script" "r200 ops.toml script"
    "r200 src/lib.rs no-script" "p200 src/lib.rs any")
declare -A TIMES=()
log "timing rebuilds ($RUNS rounds)"
for ((round = 1; round <= RUNS; round++)); do
    for trigger in "${TRIGGERS[@]}"; do
        read -r crate file expect <<<"$trigger"
        secs=$(one_run "$crate" "$file" "$expect" "$WORK/$crate-${file//\//_}-$round.log")
        TIMES[$crate $file]+="$secs "
    done
done
median_of() {
    local -a times
    read -r -a times <<<"${TIMES[$1]}"
    median "${times[@]}"
}
r10_manifest=$(median_of 'r10 ops.toml')
r10_source=$(median_of 'r10 src/lib.rs')
r200_manifest=$(median_of 'r200 ops.toml')
r200_source=$(median_of 'r200 src/lib.rs')
p200_source=$(median_of 'p200 src/lib.rs')

# Generated lines: burn-route's three files in OUT_DIR.
out_lines() {
    local ops
    ops=$(find "$CARGO_TARGET_DIR/debug/build" -path "*/$1-*/out/routed_ops.rs" -printf '%T@ %p\n' |
        sort -n | tail -n 1 | cut -d' ' -f2-)
    [[ -n $ops ]] || {
        echo "no OUT_DIR with routed_ops.rs for $1" >&2
        return 1
    }
    cat "$(dirname "$ops")"/routed_{ops,dispatch,tensor}.rs | wc -l
}
r10_lines=$(out_lines r10)
r200_lines=$(out_lines r200)

# Expanded lines: cargo's own rustc command for p200 (from the last verbose log), rerun with
# `-Zunpretty=expanded` on p200 and on the same sources without the attribute.
rustc_cmd=$(grep -m 1 -- '--crate-name p200 ' "$WORK/p200-src_lib.rs-$RUNS.log" |
    sed -e 's/^[^`]*`//' -e 's/`[^`]*$//')
[[ -n $rustc_cmd ]] || {
    echo "no rustc command for p200 in the build log" >&2
    exit 1
}
expanded_lines() {
    local dir="$WORK/$1"
    if ! (cd "$dir" && eval "RUSTC_BOOTSTRAP=1 $rustc_cmd -Zunpretty=expanded") \
        >"$dir/expanded.rs" 2>"$dir/expand.err"; then
        echo "macro expansion of $1 failed:" >&2
        cat "$dir/expand.err" >&2
        return 1
    fi
    wc -l <"$dir/expanded.rs"
}
p200_expanded=$(expanded_lines p200)
p200_plain_expanded=$(expanded_lines p200plain)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

printf '\nRebuild after a trigger (dev profile, CARGO_INCREMENTAL=0, median of %d runs; BACKWARD=%s)\n\n' "$RUNS" "$BACKWARD"
printf '%-6s %-18s %10s\n' crate trigger 'median s'
printf '%-6s %-18s %10s\n' R10 'touch ops.toml' "$r10_manifest"
printf '%-6s %-18s %10s\n' R10 'touch src/lib.rs' "$r10_source"
printf '%-6s %-18s %10s\n' R200 'touch ops.toml' "$r200_manifest"
printf '%-6s %-18s %10s\n' R200 'touch src/lib.rs' "$r200_source"
printf '%-6s %-18s %10s\n' P200 'touch src/lib.rs' "$p200_source"
printf '\nR200 (touch ops.toml) / P200 (touch src/lib.rs) = %s   (goal <= 0.7)\n' \
    "$(ratio "$r200_manifest" "$p200_source")"
printf 'R200 (touch src/lib.rs) / P200 (touch src/lib.rs) = %s\n' \
    "$(ratio "$r200_source" "$p200_source")"
printf 'Build script re-ran after touch ops.toml: yes; after touch src/lib.rs: no (checked in cargo build -v)\n'

printf '\nGenerated lines per two-input differentiable Flex op\n\n'
printf 'R  OUT_DIR lines: R10 %d, R200 %d -> (R200 - R10) / 190 = %s\n' \
    "$r10_lines" "$r200_lines" "$(ratio $((r200_lines - r10_lines)) 190)"
printf 'P  expanded lines: P200 %d, without the attribute %d -> difference / 200 = %s\n' \
    "$p200_expanded" "$p200_plain_expanded" "$(ratio $((p200_expanded - p200_plain_expanded)) 200)"
printf '   (goal: <= 150 generated lines per op)\n'
