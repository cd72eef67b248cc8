"""Winograd's tile sides against each other in a tuning run (``heuristic_retime.py fresh``'s JSON):
per layer-pass, each side's fastest timed configuration, the side the heuristic put first, and the
run's winner.  No device needed:

    python docs/perf/winograd_sides.py docs/perf/gpu37/fresh-f45.json [R]

R (5 by default) picks the kernel side (the configs' ``m`` are the tile sides)."""
import json
import math
import re
import sys


def side_of(label: str) -> int | None:
    match = re.search(r"\bm=(\d+)", label)
    return int(match.group(1)) if label.startswith("winograd") and match else None


def main(path: str) -> None:
    rows = json.load(open(path))
    ratios: dict[tuple[int, int], list[float]] = {}
    for row in rows:
        best: dict[int, float] = {}
        for label, ms in row["tuned_ms"].items():
            m = side_of(label)
            if m is not None:
                best[m] = min(best.get(m, math.inf), ms)
        if len(best) < 2:
            continue
        winner = min(row["tuned_ms"].values())
        first = side_of(row["first"])
        sides = "  ".join(f"m={m} {ms:8.3f}" for m, ms in sorted(best.items()))
        print(f"{row['layer'][:34]:34s} {row['pass'][:15]:15s} {sides}  first {row['first'].split()[0]}"
              f"{'' if first is None else f' m={first}'}  winner {row['winner'].split()[0]} {winner:8.3f}")
        for a in best:
            for b in best:
                if a > b:
                    ratios.setdefault((a, b), []).append(best[a] / best[b])
    for (a, b), values in sorted(ratios.items()):
        geo = math.exp(sum(map(math.log, values)) / len(values))
        print(f"m={a} / m={b}: {len(values)} layer-passes, geomean {geo:.3f}, range {min(values):.2f}-{max(values):.2f}, "
              f"m={a} faster on {sum(v < 1 for v in values)}")


if __name__ == "__main__":
    main(sys.argv[1])
