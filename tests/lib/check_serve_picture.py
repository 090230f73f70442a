#!/usr/bin/env python3
"""check_serve_picture.py PLAN.json PLAN.txt PICTURE.svg

Checks that `loom plan --mode serve --svg` draws what the plan says
(issue 17): the numbers written in the picture against the plan JSON (-o),
and the point names' shapes against the text's Pareto tables.

  * title: the chosen deployment's requests/s, per GPU and % within the SLOs
    equal JSON serving.predicted (requests_per_s, / gpus, slo_attainment)
    within the printed rounding (3 significant digits, 0.1%);
  * every front point, aggregated and disaggregated, in order: its tooltip's
    tok/s/user and tok/s/GPU equal JSON serving.pareto within 0.05 (%.1f);
  * its position: the axis scale is recovered from the tick labels alone
    (log x, linear y, fitted through the ticks), each circle's centre is
    mapped back and must equal the JSON point within 0.5% (two pixels);
    the chosen ring likewise against predicted per GPU / per user;
  * the key gives point k of each front the shape the text's table gives
    row k ("(tp 1) at 16", "(tp 1) at 16, 0.14 × prefill (tp 1)").
Exit 1 with every failure printed.
"""
import html
import json
import math
import re
import sys

plan_path, text_path, svg_path = sys.argv[1:4]
sv = json.load(open(plan_path))["serving"]
text = open(text_path, encoding="utf-8").read()
svg = open(svg_path, encoding="utf-8").read()
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


def close(a, b, rel=0.0, ab=0.0):
    return abs(a - b) <= max(ab, rel * abs(b))


# ---- the title's figures ----
pred, gpus = sv["predicted"], sv["deployment"]["gpus"]
m = re.search(r'id="predicted"[^>]*>.*?<tspan class="rps">([^<]+)</tspan>.*?'
              r'<tspan class="rpsg">([^<]+)</tspan>', svg)
check(m is not None, "no predicted requests/s in the title")
if m:
    rps, rpsg = float(m.group(1)), float(m.group(2))
    # %.3g: half a unit in the third significant digit
    check(close(rps, pred["requests_per_s"], rel=5e-3), "title %g req/s, JSON %g" % (rps, pred["requests_per_s"]))
    check(close(rpsg, pred["requests_per_s"] / gpus, rel=5e-3),
          "title %g req/s per GPU, JSON %g" % (rpsg, pred["requests_per_s"] / gpus))
if "ttft_s" in sv["slo"] or "tpot_s" in sv["slo"]:
    a = re.search(r'<tspan class="att">([^<]+)</tspan>', svg)
    check(a is not None and close(float(a.group(1)), 100 * pred["slo_attainment"], ab=0.051),
          "title attainment %s, JSON %g%%" % (a and a.group(1), 100 * pred["slo_attainment"]))
dep = re.search(r'id="deployment"[^>]*>([^<]*)<', svg)
check(dep is not None and sv["deployment"]["kind"] in dep.group(1) and
      ("on %d GPUs" % gpus) in dep.group(1), "title does not name the %s deployment on %d GPUs" %
      (sv["deployment"]["kind"], gpus))

# ---- the scale, from the ticks alone ----
xt = [(float(v), float(x)) for x, v in re.findall(r'<text class="xt" x="([-\d.]+)"[^>]*>([^<]+)</text>', svg)]
yt = [(float(v), float(y)) for y, v in re.findall(r'<text class="yt" x="[-\d.]+" y="[-\d.]+"[^>]*data-y="([-\d.]+)">([^<]+)</text>', svg)]
check(len(xt) >= 2 and len(yt) >= 2, "fewer than two ticks on an axis: x %d, y %d" % (len(xt), len(yt)))


def fit(pairs, f):
    # least squares of pixel = a + b·f(value)
    n = len(pairs)
    us = [f(v) for v, _ in pairs]
    ps = [p for _, p in pairs]
    mu, mp = sum(us) / n, sum(ps) / n
    b = sum((u - mu) * (p - mp) for u, p in zip(us, ps)) / sum((u - mu) ** 2 for u in us)
    return mu, mp, b


if len(xt) >= 2 and len(yt) >= 2:
    xmu, xmp, xb = fit(xt, math.log10)
    ymu, ymp, yb = fit(yt, lambda v: v)
    to_x = lambda px: 10 ** (xmu + (px - xmp) / xb)
    to_y = lambda py: ymu + (py - ymp) / yb
    ymax = max(v for v, _ in yt)
    # two pixels of the plot's height in y; 0.5% in x (log: ~1 px)
    ytol = 2 / abs(yb)

    # ---- the fronts ----
    circles = re.findall(r'<circle class="pt (agg|dis)" cx="([-\d.]+)" cy="([-\d.]+)"[^>]*>'
                         r'<title>([^<]*)</title>', svg)
    keys = {k: [html.unescape(t) for t in re.findall(r'<text class="k %s"[^>]*>([^<]*)</text>' % k, svg)]
            for k in ("agg", "dis")}
    # the text's tables: label of each row, in order
    tables = {}
    for kind, head in (("agg", "aggregated"), ("dis", "disaggregated")):
        m = re.search(r"Pareto front, %s \(steady state\):\n.*\n((?:    .*\n)*)" % head, text)
        rows = m.group(1).splitlines() if m else []
        tables[kind] = [re.match(r"\s+[\d.]+\s+[\d.]+\s+\d+\s+(.*)$", r).group(1) for r in rows]
    for kind, name in (("agg", "aggregated"), ("dis", "disaggregated")):
        pts = sv["pareto"][name]
        mine = [c for c in circles if c[0] == kind]
        check(len(mine) == len(pts), "%s: %d circles, %d JSON points" % (name, len(mine), len(pts)))
        check(len(keys[kind]) == len(pts), "%s: %d key rows, %d JSON points" % (name, len(keys[kind]), len(pts)))
        check(len(tables[kind]) == len(pts), "%s: %d table rows, %d JSON points" % (name, len(tables[kind]), len(pts)))
        for i, (q, c) in enumerate(zip(pts, mine)):
            _, cx, cy, tip = c
            t = re.search(r": ([\d.]+) tok/s/user, ([\d.]+) tok/s/GPU", tip)
            check(t is not None, "%s point %d: no figures in its tooltip" % (name, i + 1))
            if t:
                check(close(float(t.group(1)), q["tokens_per_s_per_user"], ab=0.051) and
                      close(float(t.group(2)), q["tokens_per_s_per_gpu"], ab=0.051),
                      "%s point %d: tooltip %s/%s, JSON %.3f/%.3f" % (name, i + 1, t.group(1), t.group(2),
                                                                    q["tokens_per_s_per_user"], q["tokens_per_s_per_gpu"]))
            ux, gy = to_x(float(cx)), to_y(float(cy))
            check(close(ux, q["tokens_per_s_per_user"], rel=5e-3) and close(gy, q["tokens_per_s_per_gpu"], ab=ytol),
                  "%s point %d drawn at %.2f tok/s/user, %.1f tok/s/GPU; JSON %.2f, %.1f"
                  % (name, i + 1, ux, gy, q["tokens_per_s_per_user"], q["tokens_per_s_per_gpu"]))
        for i, (k, row) in enumerate(zip(keys[kind], tables[kind])):
            want = "%s%d %s" % ("A" if kind == "agg" else "D", i + 1, row)
            check(k == want, "%s key row %d: %r, the table says %r" % (name, i + 1, k, want))

    # ---- the chosen ring ----
    c = re.search(r'<circle id="chosen" cx="([-\d.]+)" cy="([-\d.]+)"', svg)
    check(c is not None, "the chosen deployment is not marked")
    if c:
        ux, gy = to_x(float(c.group(1))), to_y(float(c.group(2)))
        check(close(ux, pred["output_tokens_per_s_per_user"], rel=5e-3) and
              close(gy, pred["output_tokens_per_s_per_gpu"], ab=ytol),
              "chosen drawn at %.2f/%.1f, JSON %.2f/%.1f" % (ux, gy, pred["output_tokens_per_s_per_user"],
                                                          pred["output_tokens_per_s_per_gpu"]))

for f in fails:
    print("check_serve_picture: " + f, file=sys.stderr)
n = len(sv["pareto"]["aggregated"]) + len(sv["pareto"]["disaggregated"])
if not fails:
    print("check_serve_picture: %s: %d front points and the chosen deployment agree with the plan" % (svg_path, n))
sys.exit(1 if fails else 0)
