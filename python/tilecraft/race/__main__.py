"""python -m tilecraft.race moe [--configs FILE] [--seed S]: the race's
functional and performance runs for tilecraft and, in the same run, the
plain PyTorch layer, with the ratio."""
from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilecraft.race")
    p.add_argument("task", choices=["moe"])
    p.add_argument("--configs", help="JSON list of cases (default: the race's four)")
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (functional checks only)")
    a = p.parse_args(argv)
    from . import moe

    cases = moe.CASES if not a.configs else json.load(open(a.configs))
    failed = 0
    for i, case in enumerate(cases):
        data = moe.generate_input(case, a.seed + i, device=a.device)
        label = ", ".join(f"{k}={v}" for k, v in case.items() if k != "kind")
        ok, detail = moe.check(moe.custom_kernel(data), moe.reference_kernel(data))
        failed += not ok
        print(f"[{case.get('kind', 'case')}] {label}: {'PASS' if ok else 'FAIL'} ({detail})")
        if case.get("kind") == "performance" and a.device != "cuda":
            print("    timing skipped: the race times with CUDA events (--device cuda)")
        elif case.get("kind") == "performance":
            ours = moe.time_ms(moe.custom_kernel, data)
            ref = moe.time_ms(moe.reference_kernel, data)
            print(f"    tilecraft {ours:.3f} ms, PyTorch reference {ref:.3f} ms, speed-up {ref / ours:.2f}x")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
