# Call 11 (on call 10's warm machine, after reverting the ws change): the
# full GPU test suite on the final kernels (kernel_sources_sha256
# a44474598a3a962c, as call 9).
export O=$OUT; mkdir -p $O/l; scripts/device_check.sh build > $O/l/main.log 2>&1; tail -1 $O/l/main.log
cd build-device && timeout 200 ctest -L gpu -j 2 --timeout 190 > $O/l/gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|\*\*\*" $O/l/gpu.log | head; grep -c Passed $O/l/gpu.log; cd $O && tar czf logs.tgz l
