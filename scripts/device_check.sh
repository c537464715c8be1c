#!/usr/bin/env bash
# One call on the GPU machine: build there, run the GPU tests, benchmark the
# perf workloads, run the main job, and (time permitting) the full correctness
# matrix. Logs land in $OUT (flat: the device tool returns few, shallow files).
#   usage: scripts/device_check.sh [steps...]
#   steps: build gpu perf run full sweep python race layer, test:OP[:TAG] (correctness of one op
#   on the GPU; TEST_FLAGS adds flags, e.g. "--config group_m=0"), bench:OP[:TAG]
#   (its benchmark; TAG defaults to perf; BENCH_FLAGS adds flags), ncu:OP:WORKLOAD (Nsight Compute
#   of that workload's kernels matching NCU_KERNELS, default the grouped GEMMs and GEMVs: speed of light,
#   memory workload, warp stalls, L2 throughput; one timed repeat; NCU_FLAGS adds bench flags such as
#   "--config cluster=2", NCU_TAG names the log apart), ab:OP:WORKLOAD (this tree's
#   kernel headers against each .ab_kernels/<rev> from scripts/kernel_ab.sh REV..., AB_ROUNDS rounds;
#   a rev whose *_params.cuh differ from this tree's is skipped unless AB_ANY_PARAMS=1),
#   abcfg:OP:WORKLOAD (the same binary under each of AB_CONFIGS, ';'-separated lists of key=val),
#   abgpu (the GPU tests matching AB_GPU_TESTS under each .ab_kernels/<rev>), ncusrc:OP:WORKLOAD
#   (one kernel's warp stalls per SASS instruction: launch NCU_SKIP of those matching NCU_KERNELS);
#   NCU_METRICS adds metrics to the ncu step (e.g. sm__cycles_active.min,sm__cycles_active.max: SM imbalance)
set -uo pipefail
OUT=${OUT:-/tmp/tilecraft_out}
mkdir -p "$OUT"
export TILECRAFT_CACHE_DIR=${TILECRAFT_CACHE_DIR:-/tmp/tilecraft_cache}
B=build-device
steps=${*:-build gpu perf run full}
summary=()
step() { summary+=("$1: $2"); echo "== $1: $2"; }
# One bench of an A/B variant named KEY, with kernel directory KDIR (empty:
# this tree's) and extra flags; a variant that timed out (a hang?) is not
# run again in later rounds.
declare -A hung=()
ab_bench() {
  local key=$1 kd=$2 op=$3 w=$4
  shift 4
  [ -z "${hung[$key]:-}" ] || { echo "skipped: timed out in an earlier round"; return; }
  TILECRAFT_KERNEL_DIR=$kd timeout ${OP_TIMEOUT:-120} $B/tilecraft bench --op "$op" --workload "$w" \
    ${BENCH_FLAGS:---warmup 2 --repeat 5 --trials 1} "$@"
  [ $? -ne 124 ] || { hung[$key]=1; echo "TIMED OUT after ${OP_TIMEOUT:-120} s (a hang?): not run again"; }
}
# The parameter headers (kernels/**/*_params.cuh) in which kernel directory
# $1 differs from this tree's, space-separated (empty: none).
ab_params_differ() {
  local f out=""
  for f in $(cd kernels && find . -name '*_params.cuh' | sort); do
    cmp -s "kernels/$f" "$1/$f" || out="$out ${f#./}"
  done
  echo "${out# }"
}
ab_summary() {
  # (A wrong result keeps its marker, which follows the p90.)
  grep -E "^###|^\[|gate_up |down |mapping |kernel_only|WRONG|ERROR|TIMED OUT|^skipped" "$1" |
    sed -E 's/ +\(.*WRONG RESULT.*/ WRONG RESULT/; s/ +\(.*//' | cut -c1-140
}

for s in $steps; do
  case $s in
    build)
      t0=$SECONDS
      # -Werror off so that one warning does not cost a device call; the
      # step counts them instead (this machine's compiler may warn where the
      # CI's does not: session 40 found g++ 13's -Wdangling-reference this way).
      if (cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTILECRAFT_WERROR=OFF && cmake --build $B -j "$(nproc)") \
          > "$OUT/build.log" 2>&1; then
        step build "ok in $((SECONDS - t0))s, $(grep -c 'warning:' "$OUT/build.log") warnings (an incremental build counts only what it recompiled)"
      else
        tail -40 "$OUT/build.log"; step build FAILED; exit 1; fi
      $B/tilecraft env > "$OUT/env.txt" 2>&1; cat "$OUT/env.txt" ;;
    gpu)
      t0=$SECONDS
      # GPU_JOBS test processes at once (default 2): the GPU tests' time is
      # mostly host work (goldens, compiles), which then overlaps; they check
      # no timing (one ratio of medians), and the JIT disk cache takes
      # concurrent writers. Untried on
      # the device as of session 11: GPU_JOBS=1 is the old serial run; more
      # than 2 risks the 240 s per-test limit (PersistentWarpSpecialisedKernel
      # took 88 s alone).
      (cd $B && timeout ${GPU_TIMEOUT:-480} ctest -L gpu -j "${GPU_JOBS:-2}" --output-on-failure) > "$OUT/gpu_tests.log" 2>&1
      rc=$?; step gpu_tests "rc=$rc in $((SECONDS - t0))s: $(grep -E 'tests passed|tests failed' "$OUT/gpu_tests.log" | tail -1)"
      grep -E "Failed|FAILED|Failure" "$OUT/gpu_tests.log" | head -20 ;;
    abgpu)
      # The GPU tests matching AB_GPU_TESTS (a ctest -R regex) under each
      # .ab_kernels/<rev> (scripts/kernel_ab.sh): a kernel branch's
      # correctness in the same call as its A/B, without rebuilding.
      for kd in $(ls -d .ab_kernels/*/ 2>/dev/null); do
        t0=$SECONDS
        rev=$(basename "$kd")
        case "$(cat "$kd/NAME" 2>/dev/null)" in
          diag/*) step "abgpu $rev" "skipped: $(cat "$kd/NAME") is a diagnostic (wrong results by design)"; continue ;;
        esac
        differ=$([ -z "${AB_ANY_PARAMS:-}" ] && ab_params_differ "$kd")
        [ -z "$differ" ] || { step "abgpu $rev" "skipped: its kernel parameter headers differ ($differ)"; continue; }
        (cd $B && TILECRAFT_KERNEL_DIR="$PWD/../$kd" timeout ${GPU_TIMEOUT:-480} \
          ctest -L gpu -R "${AB_GPU_TESTS:-WarpSpecialised|CtaPairs}" -j "${GPU_JOBS:-2}" --output-on-failure) \
          > "$OUT/abgpu_$rev.log" 2>&1
        rc=$?; step "abgpu $rev" "rc=$rc in $((SECONDS - t0))s: $(grep -E 'tests passed|tests failed' "$OUT/abgpu_$rev.log" | tail -1)"
      done ;;
    perf)
      timeout 240 $B/tilecraft bench --op moe_reduce_fused --tag perf ${BENCH_FLAGS:-} > "$OUT/bench_perf.log" 2>&1
      step bench_perf "rc=$?"; cat "$OUT/bench_perf.log" ;;
    run)
      t0=$SECONDS
      timeout 400 $B/tilecraft run --out "$OUT/results" > "$OUT/run.log" 2>&1
      rc=$?; step run "rc=$rc in $((SECONDS - t0))s: $(grep -E 'passed, .* failed' "$OUT/run.log" | tail -1)"
      (cd "$OUT" && tar czf results.tgz results && rm -rf results) ;;
    full)
      t0=$SECONDS
      timeout ${FULL_TIMEOUT:-400} $B/tilecraft test --op moe_reduce_fused --tag full > "$OUT/test_full.log" 2>&1
      rc=$?; step test_full "rc=$rc in $((SECONDS - t0))s: $(tail -1 "$OUT/test_full.log")"
      grep FAIL "$OUT/test_full.log" | head -10
      gzip -f "$OUT/test_full.log" ;;
    sweep)
      # Kernel config sweep on the perf workloads (medians only).
      for cfg in ${SWEEP:-"items=1" "items=2" "items=1 block=128" "items=2 block=128" "items=4"}; do
        flags=""; for kv in $cfg; do flags="$flags --config $kv"; done
        echo "-- $cfg"
        timeout 120 $B/tilecraft bench --op moe_reduce_fused --tag perf --variant ${SWEEP_VARIANT:-Base} --repeat 50 $flags 2>&1 \
          | grep -E "median|ERROR" | sed -E 's/.*moe_reduce_fused\/[A-Za-z]+\/([a-z0-9-]+).*median ([0-9.]+) us.* ([0-9.]+)% copy.*/\1 \2us \3%/'
      done 2>&1 | tee "$OUT/sweep.log" ;;
    python)
      t0=$SECONDS
      python3 -c "import sys, numpy; print(sys.version.split()[0], 'numpy', numpy.__version__)" > "$OUT/python_env.txt" 2>&1
      python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())" >> "$OUT/python_env.txt" 2>&1
      python3 -c "import pytest; print('pytest', pytest.__version__)" >> "$OUT/python_env.txt" 2>&1
      cat "$OUT/python_env.txt"
      # The GPU machine reaches no registry: a pure-Python pytest installed
      # here with `pip install --target .device_py pytest` travels along.
      python3 -c "import pytest" 2>/dev/null || export PYTHONPATH=$PWD/.device_py
      TILECRAFT_CACHE_DIR=$TILECRAFT_CACHE_DIR timeout ${OP_TIMEOUT:-300} scripts/python_tests.sh $B > "$OUT/python_tests.log" 2>&1
      step python_tests "rc=$? in $((SECONDS - t0))s: $(tail -1 "$OUT/python_tests.log")"
      grep -E "FAILED|Error|SKIPPED" "$OUT/python_tests.log" | head -20 ;;
    layer)
      # The issue's layer table in one log: every scope of each workload.
      t0=$SECONDS
      for w in ${LAYER_WORKLOADS:-race-performance-1 race-performance-2 deepseek-v3-T1 deepseek-v3-T16 deepseek-v3-T512 \
                deepseek-v3-T4096 qwen3-30b-a3b-T1 qwen3-30b-a3b-T4096 mixtral-8x7b-T4096}; do
        timeout ${OP_TIMEOUT:-120} $B/tilecraft bench --op fused_moe --workload "$w" ${BENCH_FLAGS:---warmup 2 --repeat 5 --trials 1}
      done > "$OUT/bench_layer.log" 2>&1
      step layer "done in $((SECONDS - t0))s, $(grep -c 'WRONG RESULT' "$OUT/bench_layer.log") wrong results, $(grep -cE '\] ERROR|  ERROR ' "$OUT/bench_layer.log") errors"
      grep -E "^\[|TFLOP/s =|    (mapping|gate_mapping|gate_up|down|combine|experts|official_e2e|clone|cublas_[a-z_]+) +median" "$OUT/bench_layer.log" | sed -E 's/ +\(.*//' | cut -c1-150 ;;
    race)
      t0=$SECONDS
      PYTHONPATH=$B/python timeout ${OP_TIMEOUT:-300} python3 -m tilecraft.race moe ${RACE_FLAGS:-} > "$OUT/race_moe.log" 2>&1
      step race_moe "rc=$? in $((SECONDS - t0))s"; cat "$OUT/race_moe.log" | tail -30 ;;
    test:*)
      IFS=: read -r _ op tag <<< "$s"
      log="$OUT/test_${op}${tag:+_$tag}.log"
      timeout ${OP_TIMEOUT:-300} $B/tilecraft test --op "$op" ${tag:+--tag $tag} ${TEST_FLAGS:-} > "$log" 2>&1
      step "test $op ${tag:-default}" "rc=$? $(tail -1 "$log")"
      grep -E "FAIL|ERROR" "$log" | head -20 ;;
    bench:*)
      IFS=: read -r _ op tag <<< "$s"
      log="$OUT/bench_${op}_${tag:-perf}.log"
      timeout ${OP_TIMEOUT:-300} $B/tilecraft bench --op "$op" --tag "${tag:-perf}" ${BENCH_FLAGS:-} > "$log" 2>&1
      step "bench $op ${tag:-perf}" "rc=$?"; grep -vE "^\[" "$log" | tail -40 ;;
    ncu:*)
      IFS=: read -r _ op w <<< "$s"
      log="$OUT/ncu_${op}_${w}${NCU_TAG:+_$NCU_TAG}.txt"
      t0=$SECONDS
      timeout ${OP_TIMEOUT:-300} ncu --clock-control none -k "regex:${NCU_KERNELS:-grouped_gem}" \
        --launch-skip ${NCU_SKIP:-0} --launch-count ${NCU_COUNT:-2} \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
        --section Occupancy --section MemoryWorkloadAnalysis_Tables --section SchedulerStats --metrics lts__t_throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed${NCU_METRICS:+,$NCU_METRICS} --section ComputeWorkloadAnalysis \
        $B/tilecraft bench --op "$op" --workload "$w" --warmup 0 --repeat 1 --trials 1 ${NCU_FLAGS:-} > "$log" 2>&1
      step "ncu $op $w" "rc=$? in $((SECONDS - t0))s"
      grep -E "^  [a-z_]+.*\(|Throughput|Duration|Hit Rate|lts__t|dram__|Pipe|Issue Slots|Stall|Registers|Achieved Occupancy" "$log" | head -${NCU_LINES:-60} ;;
    ncusrc:*)
      # Where one kernel's warps stall, per SASS instruction: SourceCounters
      # of launch NCU_SKIP (0 = first) of the kernels matching NCU_KERNELS,
      # compiled with line info (--options profile). The report comes back
      # as ncusrc_OP_WORKLOAD[_TAG].ncu-rep; the hottest instructions print.
      IFS=: read -r _ op w <<< "$s"
      base="$OUT/ncusrc_${op}_${w}${NCU_TAG:+_$NCU_TAG}"
      t0=$SECONDS
      # NCU_SAMPLING: warp-state sampling every 2^(5+N) cycles (default 0,
      # the finest: a 10 us kernel then still gives hundreds of samples).
      timeout ${OP_TIMEOUT:-300} ncu --clock-control none -k "regex:${NCU_KERNELS:-grouped_gem}" \
        --launch-skip ${NCU_SKIP:-0} --launch-count 1 --import-source yes \
        --warp-sampling-interval ${NCU_SAMPLING:-0} \
        --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
        -f -o "$base" $B/tilecraft bench --op "$op" --workload "$w" --warmup 0 --repeat 1 --trials 1 \
        --options profile ${NCU_FLAGS:-} > "$base.log" 2>&1
      rc=$?
      ncu -i "$base.ncu-rep" --page details > "$base.txt" 2>&1
      if ncu -i "$base.ncu-rep" --page source --csv --print-source sass > "$base.sass.csv" 2>&1; then
        python3 scripts/ncu_source_top.py "$base.sass.csv" ${NCU_LINES:-30} > "$base.top.txt" 2>&1
      else
        ncu --help > "$base.ncu_help.txt" 2>&1
      fi
      step "ncusrc $op $w" "rc=$rc in $((SECONDS - t0))s"
      grep -E "Duration|Registers|Warp Cycles Per Issued|Issued Warp" "$base.txt" | head -8
      head -${NCU_LINES:-45} "$base.top.txt" 2>/dev/null || tail -5 "$base.sass.csv" ;;
    ab:*)
      # This tree's kernel headers against each .ab_kernels/<rev> (scripts/kernel_ab.sh REV...), same binary.
      IFS=: read -r _ op w <<< "$s"
      log="$OUT/ab_${op}_${w}.log"
      olds=$(ls -d .ab_kernels/*/ 2>/dev/null)
      [ -n "$olds" ] || { step "ab $op $w" "no .ab_kernels/<rev> (scripts/kernel_ab.sh REV here, carry .ab_kernels)"; continue; }
      hung=()
      for r in $(seq "${AB_ROUNDS:-2}"); do
        for kd in "" $olds; do
          echo "### round $r ${kd:-this tree} $([ -n "$kd" ] && cat "$kd/REVISION")"
          # The binary fills the parameter structs of this tree's headers:
          # kernels built on other ones would read them at other offsets.
          # (AB_ANY_PARAMS=1 runs it anyway, e.g. where only comments differ.)
          differ=$([ -n "$kd" ] && [ -z "${AB_ANY_PARAMS:-}" ] && ab_params_differ "$kd")
          if [ -n "$differ" ]; then
            echo "skipped: its kernel parameter headers differ from this tree's ($differ); compare such trees by a config A/B (abcfg) in one tree, or set AB_ANY_PARAMS=1 if only comments differ"
            continue
          fi
          ab_bench "${kd:-tree}" "${kd:+$PWD/$kd}" "$op" "$w"
        done
      done > "$log" 2>&1
      step "ab $op $w" "done"
      ab_summary "$log" ;;
    abcfg:*)
      # Config A/B in one binary: AB_CONFIGS holds variants separated by ';',
      # each a list of key=val (empty = the defaults), e.g.
      # AB_CONFIGS=";gate_up_tma_store=0 down_tma_store=0". AB_ROUNDS rounds,
      # every variant once per round (machines drift, rounds keep it fair).
      IFS=: read -r _ op w <<< "$s"
      log="$OUT/abcfg_${op}_${w}.log"
      # (the appended ';' keeps a trailing empty entry, which read drops)
      IFS=';' read -r -a variants <<< "${AB_CONFIGS:-};"
      [ ${#variants[@]} -gt 0 ] || variants=("")
      hung=()
      for r in $(seq "${AB_ROUNDS:-2}"); do
        for v in "${variants[@]}"; do
          flags=""; for kv in $v; do flags="$flags --config $kv"; done
          echo "### round $r config: ${v:-default}"
          ab_bench "${v:-default}" "" "$op" "$w" $flags
        done
      done > "$log" 2>&1
      step "abcfg $op $w" "done"
      ab_summary "$log" ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
printf '%s\n' "${summary[@]}"
