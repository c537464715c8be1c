# Session 50: one call that is useful on either card a `nvidia-h200` kind lends
# (DL=N seconds of run, default 460). On an H200: the target rows
# (issue 3's table), then the GPU suite in what is left. On any other GPU:
# session50_sanitizers.sh (CLI tests, --tag large, racecheck, initcheck).
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $G"
OUT0=$OUT
mkdir -p $OUT0/t $OUT0/c
case "$G" in
  *H200*) OUT=$OUT0/t DEADLINE=200 bash docs/prepared/session48_h200_targets.sh
          OUT=$OUT0/c DEADLINE=$((${DL:-460} - SECONDS)) STEPS="gpu cli" bash docs/prepared/session49_checks.sh ;;
  *)      OUT=$OUT0/c DEADLINE=${DL:-460} bash docs/prepared/session50_sanitizers.sh ;;
esac
