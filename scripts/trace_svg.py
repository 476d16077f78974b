#!/usr/bin/env python3
"""trace_svg.py: draws a window of a Backplane trace (BP_TRACE, --trace) as
an SVG picture: one row per track, one box per span, coloured by its name
(the op, for node spans), labelled where it is wide enough.

  scripts/trace_svg.py TRACE.json OUT.svg [--window NAME] [--nth N]

--window NAME: the window is one span named NAME ("submit": one graph
submission, e.g. one decode step), the Nth from the end (--nth, default 1,
the last). Without it the whole trace is drawn.
"""
import argparse
import html
import json
import sys

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--window", default=None)
    ap.add_argument("--nth", type=int, default=1)
    ap.add_argument("--width", type=int, default=1200)
    a = ap.parse_args()
    with open(a.trace) as f:
        events = json.load(f)["traceEvents"]
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[(e["pid"], None)] = e["args"]["name"]
    spans = [e for e in events if e.get("ph") == "X"]
    if not spans:
        sys.exit("trace_svg.py: no spans in " + a.trace)
    if a.window:
        wins = sorted((e for e in spans if e["name"] == a.window), key=lambda e: e["ts"])
        if len(wins) < a.nth:
            sys.exit(f"trace_svg.py: fewer than {a.nth} spans named {a.window!r}")
        w = wins[-a.nth]
        t0, t1 = w["ts"], w["ts"] + w["dur"]
    else:
        t0 = min(e["ts"] for e in spans)
        t1 = max(e["ts"] + e["dur"] for e in spans)
    spans = [e for e in spans if e["ts"] + e["dur"] > t0 and e["ts"] < t1]
    tracks = sorted({(e["pid"], e["tid"]) for e in spans})
    colours, row_h, label_w, top = {}, 22, 190, 34
    scale = (a.width - label_w - 10) / max(t1 - t0, 1e-9)
    height = top + row_h * len(tracks) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{a.width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="8" y="18" font-size="13">{html.escape(a.window or "trace")}: '
           f'{(t1 - t0) / 1000:.3f} ms from {html.escape(a.trace.split("/")[-1])}</text>']
    for i, tr in enumerate(tracks):
        y = top + i * row_h
        label = (names.get((tr[0], None), str(tr[0])) + " / " + names.get(tr, str(tr[1])))
        out.append(f'<text x="4" y="{y + 15}">{html.escape(label[:32])}</text>')
        for e in (s for s in spans if (s["pid"], s["tid"]) == tr):
            x0 = label_w + (max(e["ts"], t0) - t0) * scale
            x1 = label_w + (min(e["ts"] + e["dur"], t1) - t0) * scale
            c = colours.setdefault(e["name"], PALETTE[len(colours) % len(PALETTE)])
            tip = f'{e["name"]} {e["dur"]:.1f} us'
            out.append(f'<rect x="{x0:.2f}" y="{y + 2}" width="{max(x1 - x0, 0.5):.2f}" height="{row_h - 4}" '
                       f'fill="{c}"><title>{html.escape(tip)}</title></rect>')
            if x1 - x0 > 7 * len(e["name"]):
                out.append(f'<text x="{x0 + 2:.2f}" y="{y + 15}" fill="white">{html.escape(e["name"])}</text>')
    y = top + len(tracks) * row_h + 16
    x = 8
    for n, c in colours.items():
        out.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{c}"/>'
                   f'<text x="{x + 13}" y="{y + 9}">{html.escape(n)}</text>')
        x += 20 + 7 * len(n)
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
