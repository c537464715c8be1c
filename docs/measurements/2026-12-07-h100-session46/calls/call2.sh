# Call 2 (same warm machine as call 1, its build-werror tree): the race tag
# with room to finish (call 1's step was cut by its deadline), the combine
# under synccheck, then calls/call2_ab.sh (one-process A/B of fused_combine=1).
export O=$OUT; mkdir -p $O/l; B=build-werror
S2='T=86,H=1232,I=552,E=64,K=6,dtype=fp16,weights=per_expert,routing=router,renormalize=true,config=mapping_blocks=1;fused_combine=1'
t0=$SECONDS; timeout 240 $B/tilecraft test --tag race --case-timeout 60 > $O/l/race.log 2>&1
echo "race rc=$? in $((SECONDS-t0))s: $(tail -1 $O/l/race.log)"
t0=$SECONDS; timeout 100 compute-sanitizer --tool synccheck --error-exitcode 3 $B/tilecraft test --op fused_moe --shape "$S2" > $O/l/synccheck.log 2>&1
echo "synccheck rc=$? in $((SECONDS-t0))s: $(tail -2 $O/l/synccheck.log|tr '\n' ' ')"
DEADLINE=$((560-SECONDS)) OUT=$O bash docs/prepared/session46_ab.sh 2>&1 | sed 's/^/ab: /'
