# Session 53's one-call order (inline as the device command): on an H200
# the target rows first, then the two patch A/Bs; on any other GPU the two
# patch A/Bs (the tile-ring one first; its `--tag large` step gets what is
# left of its share).
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $G"
O0=$OUT; mkdir -p $O0/a $O0/b $O0/c
case "$G" in
  *H200*) OUT=$O0/a DEADLINE=250 bash docs/prepared/session48_h200_targets.sh
          OUT=$O0/b DEADLINE=$((470 - SECONDS)) bash docs/prepared/session53_ws_split.sh
          OUT=$O0/c DEADLINE=$((575 - SECONDS)) bash docs/prepared/session52_tile_ring_patch.sh ;;
  *) OUT=$O0/a DEADLINE=300 bash docs/prepared/session52_tile_ring_patch.sh
     OUT=$O0/b DEADLINE=$((575 - SECONDS)) bash docs/prepared/session53_ws_split.sh ;;
esac
