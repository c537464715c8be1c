# Call 2, on the same warm machine (the build of call 1 reused):
DEADLINE=430 STEPS="race gpu" bash docs/prepared/session49_checks.sh
