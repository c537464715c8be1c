# Session 40: the README's build on the GPU machine's g++ 13 as a user runs
# it (make build: deps, then the default TILECRAFT_WERROR=ON), in a fresh
# build directory. Calls 1-8 built with scripts/device_check.sh, which turns
# -Werror off; its g++ 13 warned of 8 references bound through temporaries.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
t0=$SECONDS; make build BUILD_DIR=build-werror > $OUT/make_build.log 2>&1
echo "make build rc=$? in $((SECONDS - t0))s; warnings: $(grep -c 'warning:' $OUT/make_build.log)"
grep -E "warning:|error:" $OUT/make_build.log | head -10
cd $O && tar czf logs.tgz l
