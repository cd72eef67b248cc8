"""An A/B run of ``gpu_ab.sh``'s ``ab_rounds`` (its merged JSON: changed-SIDE-ROUND.json -> a
``clconv bench --json`` run) compared per layer-pass: each side's least kernel time and stream time
over its rounds, the ratio this tree / the base, and the geomeans over the layer-passes whose
algorithm or configuration differs between the sides ("moved") and over the rest.  No device:

    python docs/perf/ab_streams.py docs/perf/gpu38/f63-streams.json [BASE]

BASE names the other side (the file names' second word; by default whichever is not "work")."""
import json
import math
import sys


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def main(path: str, base: str | None = None) -> None:
    runs = json.load(open(path))
    sides: dict[str, dict] = {}
    for name, run in runs.items():
        side = name.split("-")[1]
        for row in run["rows"]:
            key = (row["layer"], row["pass_"])
            best = sides.setdefault(side, {}).setdefault(key, {"ms": math.inf, "stream_ms": math.inf, "choice": None})
            best["ms"] = min(best["ms"], row["ms"])
            best["stream_ms"] = min(best["stream_ms"], row["stream_ms"])
            best["choice"] = (row["algorithm"], json.dumps(row["config"], sort_keys=True))
            best["ref_ms"] = min(best.get("ref_ms", math.inf), row["ref_ms"])
    base = base or next(s for s in sides if s != "work")
    work, other = sides["work"], sides[base]
    groups: dict[str, dict[str, list[float]]] = {"moved": {"ms": [], "stream": []}, "kept": {"ms": [], "stream": []}}
    for key in sorted(work, key=list(work).index):
        if key not in other:
            continue
        a, b = work[key], other[key]
        moved = a["choice"] != b["choice"]
        kernel, stream = a["ms"] / b["ms"], a["stream_ms"] / b["stream_ms"]
        groups["moved" if moved else "kept"]["ms"].append(kernel)
        groups["moved" if moved else "kept"]["stream"].append(stream)
        print(f"{key[0][:34]:34s} {key[1][:15]:15s} {'moved' if moved else 'kept ':5s} kernel {b['ms']:8.3f} -> {a['ms']:8.3f} "
              f"({kernel:.3f})  stream {stream:.3f}  against cuDNN's kernel {b['ms'] / b['ref_ms']:.2f} -> "
              f"{a['ms'] / a['ref_ms']:.2f}  {a['choice'][0]} {json.loads(a['choice'][1]).get('m', '')}")
    for name, values in groups.items():
        if values["ms"]:
            print(f"{name}: {len(values['ms'])} layer-passes, kernel {geomean(values['ms']):.3f} "
                  f"({min(values['ms']):.2f}-{max(values['ms']):.2f}), stream {geomean(values['stream']):.3f} "
                  f"({min(values['stream']):.2f}-{max(values['stream']):.2f})")


if __name__ == "__main__":
    main(*sys.argv[1:])
