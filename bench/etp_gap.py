#!/usr/bin/env python3
"""etp_gap.py LOOM [CASES] — what expert tensor parallelism (--etp) below the
TP would gain over `loom plan --space megatron`, whose space gives the experts
the attention TP (issue 19).

For each MoE case it plans with --space megatron, exports the plan to a
Megatron command (loom export --to megatron) and re-evaluates it with
`loom eval --from-megatron`; then, keeping the plan's pipeline (stages,
layout, interleaving) and recompute, evaluates every tp in 1..8 x cp in 1..8
(dp takes the rest), micro-batch in {1, 2, the plan's}, etp dividing tp and
ep dividing the experts with ep x etp dividing tp x cp x dp (MoE parallel
folding: with etp < tp the expert-parallel group spans TP ranks). It prints
the best that fits with etp = tp, with etp != tp, and with 1 < etp < tp
(the expert TP the Megatron space does not search: it gives the experts
the TP or expert TP 1), and the gains of the latter two over the plan
(positive: the Megatron space misses it).
CASES picks a comma-separated subset by name (default: all).
"""
import json, os, re, subprocess, sys, tempfile
L = sys.argv[1]
CASES = [
 ("mixtral-h100x16", "mixtral-8x7b", "dgx-h100-x2", 256, 4096),
 ("mixtral-h100x32", "mixtral-8x7b", "dgx-h100-x4", 256, 4096),
 ("mixtral-h100x64", "mixtral-8x7b", "dgx-h100-x8", 512, 4096),
 ("qwen3-30b-h100x64", "qwen3-30b-a3b", "dgx-h100-x8", 512, 4096),
 ("qwen3-30b-h100x256", "qwen3-30b-a3b", "dgx-h100-x32", 1024, 4096),
 ("dsv3-h100x256", "deepseek-v3", "dgx-h100-x32", 1024, 4096),
 ("dsv3-h100x1024", "deepseek-v3", "dgx-h100-x128", 4096, 4096),
]
pick = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
def run(a):
    p = subprocess.run(a, capture_output=True, text=True); return p.returncode, p.stdout, p.stderr
tmp = tempfile.mkdtemp(prefix="etp_gap")
for name, model, cl, gbs, seq in CASES:
    if pick and name not in pick: continue
    f = os.path.join(tmp, name + ".json")
    rc, out, err = run([L, "plan", model, "--cluster", cl, "--gbs", str(gbs), "--seq", str(seq), "--space", "megatron", "--no-timings", "-o", f])
    if rc: print(name, "plan failed", err.strip()[:200]); continue
    meg = json.load(open(f))["predicted"]["step_time_s"]
    rc, script, err = run([L, "export", f, "--to", "megatron"])
    if rc: print(name, "export failed", err.strip()[:200]); continue
    cmd = script[script.index("torchrun"):]
    cmd = cmd.replace("\\\n", " ")
    cmd = " ".join(cmd.split())
    m = lambda k, d: int(re.search(k + r" (\d+)", cmd).group(1)) if re.search(k + r" (\d+)", cmd) else d
    tp, cp, ep = m("--tensor-model-parallel-size", 1), m("--context-parallel-size", 1), m("--expert-model-parallel-size", 1)
    pp = m("--pipeline-model-parallel-size", 1)
    G = 8 * int(cl.rsplit("x", 1)[1]); dp = G // (tp * cp * pp)
    E = m("--num-experts", 0)
    def ev(etp, epv, tpv=tp, cpv=cp, mbs=None):
        c = re.sub(r"--expert-model-parallel-size \d+", f"--expert-model-parallel-size {epv}", cmd)
        c = re.sub(r"--tensor-model-parallel-size \d+", f"--tensor-model-parallel-size {tpv}", c)
        c = re.sub(r"--context-parallel-size \d+", f"--context-parallel-size {cpv}", c)
        if mbs: c = re.sub(r"--micro-batch-size \d+", f"--micro-batch-size {mbs}", c)
        c = c.replace(" --sequence-parallel", "").replace(" --tp-comm-overlap", "")
        if tpv > 1: c = c.replace("pretrain_gpt.py", "pretrain_gpt.py --sequence-parallel --tp-comm-overlap")
        c = re.sub(r" --expert-tensor-parallel-size \d+", "", c)
        c = c.replace("pretrain_gpt.py", f"pretrain_gpt.py --expert-tensor-parallel-size {etp}")
        rc, out, err = run([L, "eval", model, "--cluster", cl, "--from-megatron", c, "--json"])
        if rc: return None, err.strip()[:150]
        r = json.loads(out); return (r["step_time_s"] if r["fits"] else None), ("fits" if r["fits"] else "oom")
    etp0 = m("--expert-tensor-parallel-size", tp)   # the plan's expert TP
    base, why = ev(etp0, ep)
    best = None; bsame = None; bmid = None
    mb0 = m("--micro-batch-size", 1)
    for tpv in (1, 2, 4, 8):
      for cpv in (1, 2, 4, 8):
        if G % (tpv * cpv * pp): continue
        dpv = G // (tpv * cpv * pp)
        for mbs in sorted({1, 2, mb0}):
          if gbs % (dpv * mbs): continue
          for etp in [t for t in (1, 2, 4, 8) if tpv % t == 0]:
            for e in [e for e in (1, 2, 4, 8, 16, 32, 64, 128, 256) if E % e == 0 and (tpv*cpv*dpv) % (e*etp) == 0]:
                t, w = ev(etp, e, tpv, cpv, mbs)
                if t and etp != tpv and (best is None or t < best[0]): best = (t, f"tp{tpv} cp{cpv} mbs{mbs} etp{etp} ep{e}")
                if t and etp == tpv and (bsame is None or t < bsame[0]): bsame = (t, f"tp{tpv} cp{cpv} mbs{mbs} etp{etp} ep{e}")
                if t and 1 < etp < tpv and (bmid is None or t < bmid[0]): bmid = (t, f"tp{tpv} cp{cpv} mbs{mbs} etp{etp} ep{e}")
    print(f"{name:20} tp{tp} etp{etp0} cp{cp} pp{pp} dp{dp} ep{ep} mbs{mb0}  plan {meg:.4f}  eval(plan) {base:.4f}  grid best etp=tp {bsame}  best etp!=tp {best}"
          + (f"  gain {100*(meg/best[0]-1):.2f}%" if best else "")
          + f"  best 1<etp<tp {bmid}" + (f"  gain {100*(meg/bmid[0]-1):.2f}%" if bmid else ""), flush=True)
