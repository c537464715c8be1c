# Session 41, call 6 (run inline from the run tool, recorded here): the
# layer's test at Mixtral T=256 on the new tile height (call 5's test line
# ran only its --shape cases: --shape then replaced --workload, fixed in
# 8db4c7a). A first try without the build step found no build directory.
export O=$OUT; B=build-werror; if [ -d $B ]; then cmake --build $B -j16; else make build BUILD_DIR=$B; fi > $O/build.log 2>&1; echo "build rc=$?"; timeout 60 $B/tilecraft test --op fused_moe --workload mixtral-8x7b-T256 2>&1 | tail -2 | cut -c1-200
