# Call 5: fused_moe on shapes that appear in no manifest or issue (odd H and
# I, E not a power of two, both routing modes, skewed / empty / dropped
# routings, K = 1..8, T from 1 to 9000), each against the golden with the
# defaults, and the T <= 5 ones also on the mapped path (decode=0).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
S=docs/measurements/2026-11-30-h200-session27/calls/shapes.txt
while read -r s; do
  timeout 60 build-device/tilecraft test --op fused_moe --shape "$s" > $OUT/one.log 2>&1; rc=$?
  echo "rc=$rc $(grep -E 'PASS|FAIL|rror' $OUT/one.log | head -2 | cut -c1-220)" | tee -a $OUT/shapes.log
  T=${s#T=}; T=${T%%,*}
  if [ "$T" -le 5 ]; then
    timeout 60 build-device/tilecraft test --op fused_moe --shape "$s" --config decode=0 > $OUT/one.log 2>&1; rc=$?
    echo "decode=0 rc=$rc $(grep -E 'PASS|FAIL|rror' $OUT/one.log | head -2 | cut -c1-220)" | tee -a $OUT/shapes.log
  fi
done < $S
cd $O && tar czf logs.tgz l
