#!/usr/bin/env bash
# Fuzzes bloomery's parsers of untrusted bytes with cargo-fuzz (libFuzzer, nightly): the
# targets in fuzz/fuzz_targets/, one at a time, single job (docs/fuzzing.md).
#
#   scripts/fuzz.sh                 every target for 600 s
#   scripts/fuzz.sh --smoke         every target for 20 s (CI)
#   scripts/fuzz.sh --seconds N [TARGET...]
#   scripts/fuzz.sh --reach         how far the committed corpora get (per variant)
#   scripts/fuzz.sh --merge         add what the last runs found to fuzz/corpus (minimized)
#   scripts/fuzz.sh --seed          rewrite the seed files in fuzz/corpus from real files
#
# Exits non-zero when a target crashes (its input is in fuzz/artifacts/TARGET/); without
# a nightly toolchain it prints why and exits 0 ("skipped"). New inputs go to
# fuzz/target/corpus/TARGET, never into the committed corpus (see --merge).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fuzz=$root/fuzz

seconds=600
mode=run
targets=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --smoke) seconds=20 ;;
        --seconds) seconds=$2; shift ;;
        --reach) mode=reach ;;
        --merge) mode=merge ;;
        --seed) mode=seed ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1") ;;
    esac
    shift
done
if [[ ${#targets[@]} -eq 0 ]]; then
    targets=(native_file native_envelope guava_bytes dump_pieces parquet_bytes redisbloom_chunks)
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: skipped: no nightly Rust toolchain (cargo-fuzz needs one: rustup toolchain install nightly)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin=$fuzz/target/$triple/release

if [[ $mode == seed ]]; then
    files=$fuzz/target/variant-files
    CARGO_TARGET_DIR=$fuzz/target/host cargo run -q --release -p bloomery --example variant_files -- "$files" 300
    (cd "$fuzz" && cargo +nightly run -q --release --example make_seeds -- "$files")
    exit 0
fi

cargo +nightly fuzz build --fuzz-dir "$fuzz"

if [[ $mode == reach ]]; then
    # Each corpus input once, with a trace line saying where it stopped: the header
    # checks, a variant's parameter/payload checks, or opened (then fully exercised).
    for target in "${targets[@]}"; do
        echo "== $target: $(ls "$fuzz/corpus/$target" | wc -l) inputs"
        find "$fuzz/corpus/$target" -type f -print0 |
            BLOOMERY_FUZZ_TRACE=1 xargs -0 "$bin/$target" -detect_leaks=0 2>&1 |
            sed -n "s/^trace $target //p" |
            sed -E 's/^(stage=variant v[12]( unsealed)? [a-z-]+) refused: .*/\1 refused by its parser/' |
            sort | uniq -c | sort -rn
    done
    exit 0
fi

if [[ $mode == merge ]]; then
    for target in "${targets[@]}"; do
        work=$fuzz/target/corpus/$target
        [[ -d $work ]] || continue
        before=$(ls "$fuzz/corpus/$target" | wc -l)
        # Adds to the committed corpus only the inputs that reach new coverage.
        cargo +nightly fuzz run --fuzz-dir "$fuzz" "$target" "$fuzz/corpus/$target" "$work" -- -merge=1 \
            >"$fuzz/target/merge-$target.log" 2>&1
        seeds=$fuzz/target/seeds/$target
        rm -rf "$seeds" && mkdir -p "$seeds"
        cp "$fuzz/corpus/$target"/seed-* "$seeds"/ 2>/dev/null || true
        cargo +nightly fuzz cmin --fuzz-dir "$fuzz" "$target" "$fuzz/corpus/$target" \
            >"$fuzz/target/cmin-$target.log" 2>&1
        # The named seeds (real files, see fuzz/examples/make_seeds.rs) stay under their
        # names; cmin renames what it keeps to the SHA-1 of its bytes.
        for seed in "$seeds"/seed-*; do
            [[ -e $seed ]] || continue
            rm -f "$fuzz/corpus/$target/$(sha1sum "$seed" | cut -d' ' -f1)"
            cp "$seed" "$fuzz/corpus/$target/"
        done
        echo "$target: $before -> $(ls "$fuzz/corpus/$target" | wc -l) inputs, $(du -sb "$fuzz/corpus/$target" | cut -f1) bytes"
    done
    exit 0
fi

failed=()
for target in "${targets[@]}"; do
    work=$fuzz/target/corpus/$target
    logs=$fuzz/target/logs/$target
    mkdir -p "$work" "$logs" "$fuzz/artifacts/$target"
    echo "== $target: $seconds s"
    # One job, one worker: libFuzzer runs the job in a child that logs to fuzz-0.log in
    # the current directory.
    rm -f "$logs/fuzz-0.log"
    status=0
    (cd "$logs" && cargo +nightly fuzz run --fuzz-dir "$fuzz" "$target" "$work" "$fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -jobs=1 -workers=1 -max_len=16384 -timeout=30 \
        -print_final_stats=1 >"$logs/run.log" 2>&1) || status=$?
    log=$logs/fuzz-0.log
    [[ -f $log ]] || log=$logs/run.log
    cp "$log" "$fuzz/target/logs/$target.log"
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    echo "   executions: ${execs:-?}; last status: ${last:-none}"
    if [[ $status -ne 0 ]] || grep -qE '^==[0-9]+== ERROR|panicked at|SUMMARY: libFuzzer' "$log"; then
        echo "   CRASH: see $fuzz/target/logs/$target.log and $fuzz/artifacts/$target/"
        grep -E 'panicked at|ERROR|SUMMARY' -A2 "$log" | head -n 12 | sed 's/^/   /'
        failed+=("$target")
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz: crashes in: ${failed[*]}"
    exit 1
fi
echo "fuzz: no crashes (${targets[*]}, $seconds s each)"
