# Call 1 (inline command of the device call; tree acf86b8's working tree):
# on an H200 the target rows then the short-call order; on any other GPU the
# sanitizer follow-up. An H100 came, so the second branch ran.
G=$(nvidia-smi --query-gpu=name --format=csv,noheader|head -1); echo "GPU: $G"; O0=$OUT; mkdir -p $O0/a $O0/b
case "$G" in
  *H200*) OUT=$O0/a DEADLINE=240 bash docs/prepared/session48_h200_targets.sh
          OUT=$O0/b DEADLINE=$((560-SECONDS)) bash docs/prepared/session51_priority.sh;;
  *) OUT=$O0/a DEADLINE=560 bash docs/prepared/session51_sanitizer_followup.sh;;
esac
