# Session 36 call 3: why DeepSeek-V3 T=512's down projection streams slower
# than its gate/up (call 2's stamps: 87-90% against 92-94% of the read
# ceiling, no tail in either). Two guesses:
#   - a power-of-two row stride (down's weight rows are I x 2 = 4096 bytes;
#     gate/up's 14336): the same layer at I = 2048 / 2112 / 1984 and at
#     H = 8192 (gate/up rows 16384 bytes), stage times in one process each;
#   - the ring's depth: down_block_n=128 (24 KB stages) with 6 and 8 stages,
#     in-process against the default (64 x 256, 4 x 40 KB).
export O=$OUT; mkdir -p $O/l; export OUT=$O/l
scripts/device_check.sh build > $OUT/main.log 2>&1; tail -1 $OUT/main.log
B=build-device
. scripts/vs_bench.sh
for hi in "7168 2048" "7168 2112" "7168 1984" "8192 2048" "8192 1536"; do
  set -- $hi
  timeout 100 $B/tilecraft bench --op fused_moe --shape "T=512,H=$1,I=$2,E=256,K=8,routing=uniform,dtype=bf16" \
    --warmup 2 --repeat 10 --trials 1 --scopes gate_up,down > $OUT/stride_H$1_I$2.log 2>&1
  echo "== H=$1 I=$2 rc=$?"
  python3 - $OUT/stride_H$1_I$2.log $1 $2 <<'PY'
import re, sys
log, H, I = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\s+(gate_up|down)\s+median\s+([\d.]+) us", open(log).read(), re.M)}
gb = {"gate_up": 256 * 2 * I * H * 2 / 1e9, "down": 256 * H * I * 2 / 1e9}
print("  " + "  ".join(f"{k} {v:.1f} us {gb[k] / v * 1e6:.0f} GB/s" for k, v in t.items()))
PY
done
grep -m1 -i "ceiling" $OUT/stride_H7168_I2048.log | cut -c1-200
vs dsv3_512_dbn128 deepseek-v3-T512 down down_block_n=128
vs dsv3_512_dbn128_s8 deepseek-v3-T512 down down_block_n=128,down_stages=8
cd $O && tar czf logs.tgz l
