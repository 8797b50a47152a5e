#!/usr/bin/env bash
# The public API of cai-runtime and cai-gt, checked against the listings in the repository
# (cai-runtime/public-api.txt, cai-gt/public-api.txt): every path by which an item can be named
# from another crate, with all features on (scripts/public-api.py reads rustdoc's JSON). A
# change to the API then shows in review as a change to a listing. `--bless` rewrites them.
# Needs the nightly that scripts/miri.sh pins (rustdoc's JSON output is unstable); without it,
# says so and passes.
set -euo pipefail
cd "$(dirname "$0")/.."
toolchain=$(scripts/miri.sh --toolchain)
if ! cargo "+$toolchain" --version >/dev/null 2>&1; then
    echo "== public API: skipped, no $toolchain toolchain here"
    exit 0
fi
source scripts/cuda-env.sh >/dev/null
status=0
for package in cai-runtime cai-gt; do
    crate=${package//-/_}
    RUSTDOCFLAGS="-Z unstable-options --output-format json" \
        cargo "+$toolchain" doc -q --no-deps -p "$package" --all-features \
        --target-dir target/public-api
    listing=$(python3 scripts/public-api.py "target/public-api/doc/$crate.json")
    if [ "${1:-}" = --bless ]; then
        printf '%s\n' "$listing" >"$package/public-api.txt"
    elif ! diff -u "$package/public-api.txt" <(printf '%s\n' "$listing"); then
        echo "$package's public API differs from $package/public-api.txt (above): if the change is meant, scripts/public-api.sh --bless"
        status=1
    fi
    python3 scripts/public-api.py "target/public-api/doc/$crate.json" --summary | sed "s/^/$package: /"
done
exit $status
