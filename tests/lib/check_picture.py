"""check_picture.py PLAN.json TABLE.txt PICTURE.svg — the picture and the
table of one `loom plan` run agree with the plan (tests/plan_svg.sh):

  * the title's step and the schedule's step and axis end are the predicted
    step within 0.5%, and the schedule's bars end at the axis end;
  * the schedule is named for what the plan runs: 1F1B, interleaved with v
    chunks, or forward only (decode) — and a decode picture has no backward;
  * one legend colour per pipeline rank, none repeated;
  * every stage's parallelism reads the same in the JSON (mesh_axes and
    degrees), the table row and the legend ("cp32 x tp4").
Prints what is wrong and exits 1; exits 0 when all agree."""
import json, re, sys

plan = json.load(open(sys.argv[1]))
table = open(sys.argv[2]).read()
svg = open(sys.argv[3]).read()
errors = []

def near(a, b, what):
    if abs(a - b) > 0.005 * abs(b):
        errors.append(f"{what}: {a} against the plan's {b}")

step = plan["predicted"]["step_time_s"]
sched = plan["schedule"]
texts = [re.sub(r"<[^>]+>", "", t) for t in re.findall(r"<text[^>]*>.*?</text>", svg)]
title = texts[0]
m = re.search(r"step ([0-9.e+-]+) s", title)
near(float(m.group(1)) if m else -1, step, "title step")
sch = [t for t in texts if t.startswith("Schedule:")]
if len(sch) != 1:
    errors.append(f"{len(sch)} schedule titles")
else:
    s = sch[0]
    m = re.search(r"step ([0-9.e+-]+) s", s)
    near(float(m.group(1)) if m else -1, step, "schedule step")
    v = sched["virtual_stages"]
    if plan["inputs"]["mode"] == "infer":
        want = "Schedule: forward only (decode)"
    elif v > 1:
        want = f"Schedule: interleaved 1F1B with {v} chunks per rank"
    else:
        want = "Schedule: 1F1B,"
    if not s.startswith(want):
        errors.append(f"schedule title '{s}' does not start with '{want}'")
if plan["inputs"]["mode"] == "infer" and "backward" in svg:
    errors.append("a decode picture mentions backward passes")
if re.search(r"\b1 (nodes|GPUs|replicas)\b", svg):
    errors.append("'1 nodes' or the like")
# the schedule: its bars end at the axis end, labelled with the step
after = svg[svg.index("Schedule:"):]
line = re.search(r'<line x1="(\d+)" y1="\d+" x2="(\d+)"', after)
x0, x1 = int(line.group(1)), int(line.group(2))
ends = [float(x) + float(w) for x, w in re.findall(r'<rect x="([0-9.]+)" y="\d+" width="([0-9.]+)"', after)]
if not ends or abs(max(ends) - x1) > 0.5 or min(float(x) for x in re.findall(r'<rect x="([0-9.]+)"', after)) < x0 - 0.5:
    errors.append(f"schedule bars span {min(ends) if ends else None}..{max(ends) if ends else None}, axis {x0}..{x1}")
axis = [t for t in texts if re.fullmatch(r"[0-9.e+-]+ s", t) and t != "0 s"]
near(float(axis[-1][:-2]) if axis else -1, step, "schedule axis end")
drawn = sum(plan["predicted"]["breakdown_s"].values())
near(drawn, step, "breakdown sum")
# legend: one colour per rank, none repeated
legend = re.findall(r'<rect x="80" y="\d+" width="10" height="10" fill="(#[0-9a-f]{6})"/>', svg)
if len(legend) != sched["pipeline_stages"] or len(set(legend)) != len(legend):
    errors.append(f"{len(legend)} legend colours ({len(set(legend))} distinct) for {sched['pipeline_stages']} ranks")
# parallelism: JSON, table, legend
rows = table.split("\n  stage ")[1].split("\n")[1:]
for st in plan["stages"]:
    ax, mesh = st["mesh_axes"], st["mesh"]
    if ax == ["tp", "tp"]:
        label = f"tp{mesh[0]}x{mesh[1]}"
    else:
        label = " x ".join(f"{a}{n}" for a, n in zip(ax, mesh) if a != "-") or "no split"
    deg = {"tp": st["tensor_parallel"], "cp": st["context_parallel"]}
    for a, n in zip(ax, mesh):
        if a in ("tp", "cp") and ax != ["tp", "tp"] and deg[a] != n:
            errors.append(f"stage {st['index']}: mesh_axes {ax} but {a} degree {deg[a]}")
    if st["tensor_parallel"] * st["context_parallel"] * st["data_parallel"] != len(st["gpus"]):
        errors.append(f"stage {st['index']}: tp x cp x dp != GPUs")
    row = rows[st["index"]]
    if f" {label} " not in row:
        errors.append(f"stage {st['index']}: table row '{row.strip()}' lacks '{label}'")
    if st["index"] < sched["pipeline_stages"] and not re.search(
            rf"rank {st['group']}: [^<]*[;,] {re.escape(label)}[,;]", svg):
        errors.append(f"rank {st['group']}: legend lacks '{label}'")
for e in errors:
    print(f"{sys.argv[3]}: {e}")
sys.exit(1 if errors else 0)
