G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $G"
O0=$OUT; mkdir -p $O0/a $O0/b
case "$G" in
  *H200*) OUT=$O0/a DEADLINE=220 bash docs/prepared/session48_h200_targets.sh
          OUT=$O0/b DEADLINE=$((585 - SECONDS)) STEPS="tests layer bench" bash docs/prepared/session54_global_maps.sh ;;
  *) OUT=$O0/b DEADLINE=585 bash docs/prepared/session54_global_maps.sh ;;
esac
