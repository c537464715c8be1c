# Session 50: one call that is useful on either card a `nvidia-h200` kind lends.
# On an H200: the target rows (issue 3's table), then the checks in what is
# left of 560 s. On any other GPU: the CLI tests (the bounds-wording fix that
# call 1 asked for), then racecheck and initcheck on every op.
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $G"
OUT0=$OUT
mkdir -p $OUT0/t $OUT0/c
case "$G" in
  *H200*) OUT=$OUT0/t DEADLINE=200 bash docs/prepared/session48_h200_targets.sh
          OUT=$OUT0/c DEADLINE=$((560 - SECONDS)) STEPS="gpu cli python race" bash docs/prepared/session49_checks.sh ;;
  *)      OUT=$OUT0/c DEADLINE=560 bash docs/prepared/session50_sanitizers.sh ;;
esac
