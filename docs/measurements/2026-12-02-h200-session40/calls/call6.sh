# Session 40: the main job on the GPU (tilecraft run: env, compile, test,
# bench; reports), as the README's main command runs it after setup.
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build run > $OUT/main.log 2>&1; grep "^== " $OUT/main.log
tail -5 $OUT/run.log
cd $O && tar czf logs.tgz l
