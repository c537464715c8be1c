# Only on an H200: the target rows, then the checks in what is left.
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $G"
case "$G" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
OUT0=$OUT
mkdir -p $OUT0/t $OUT0/c
OUT=$OUT0/t DEADLINE=200 bash docs/prepared/session48_h200_targets.sh
OUT=$OUT0/c DEADLINE=$((330 - SECONDS)) STEPS="gpu race" bash docs/prepared/session49_checks.sh
