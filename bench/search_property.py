#!/usr/bin/env python3
"""search_property.py LOOM [SAMPLES] [CASES] — issue 19's property, measured.

For each case (8 to 16,384 GPUs; dense, MoE, long sequence, tied
embeddings) it plans with `loom plan --space megatron` and `loom plan`
(full space), then draws SAMPLES random configurations (seeded: the same
ones on every run) of everything `loom eval` accepts — TP with SP and
TP-comm overlap, CP, EP and expert TP (MoE models: ep x etp over tp x cp x dp
ranks, etp dividing tp), PP with
interleaving 1..8 (3, 5, 7 included) and
uneven first/last stages, micro-batch, none / selective / full / partial
recompute (N blocks per stage), ZeRO 1..3 — keeps those `loom eval`
accepts and that fit, and reports how many beat each plan and by how much.
The property holds when no sample beats the Megatron plan by more than
0.1 % and none beats the full-space plan.

Cases: CASES picks a comma-separated subset by name (default: all ten).
"""
import json
import random
import subprocess
import sys

CASES = [
    # name, model, cluster, gbs, seq
    ("gpt2-h100x8", "gpt2", "dgx-h100-x1", 256, 1024),
    ("llama3.2-1b-h100x8", "tests/data/llama-3.2-1b.json", "dgx-h100-x1", 256, 4096),
    ("llama3-8b-h100x16", "llama-3-8b", "dgx-h100-x2", 256, 4096),
    ("mixtral-h100x32", "mixtral-8x7b", "dgx-h100-x4", 256, 4096),
    ("mistral-32k-h100x32", "mistral-7b", "dgx-h100-x4", 64, 32768),
    ("llama3-70b-h100x128", "llama-3-70b", "dgx-h100-x16", 512, 4096),
    ("qwen3-30b-moe-h100x256", "qwen3-30b-a3b", "dgx-h100-x32", 1024, 4096),
    ("llama3-70b-h100x1024", "llama-3-70b", "dgx-h100-x128", 2048, 8192),
    ("gpt3-175b-h100x1024", "gpt3-175b", "dgx-h100-x128", 2048, 2048),
    ("llama3.1-405b-h100x16k", "llama-3.1-405b", "dgx-h100-x2048", 2048, 8192),
]


def run(args):
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout


def plan(loom, model, cluster, gbs, seq, space):
    """(step time, the plan's model facts), or (None, {}) when nothing fits."""
    # loom plan searches ZeRO 1-3 by default, as the samples draw ZeRO-2/3 too
    rc, out = run([loom, "plan", model, "--cluster", cluster, "--gbs", str(gbs), "--seq", str(seq),
                   "--space", space, "--json", "--no-timings"])
    if rc:
        return None, {}
    p = json.loads(out)
    return p["predicted"]["step_time_s"], p["model"]


def gpus(cluster):
    return 8 * int(cluster.rsplit("x", 1)[1])


def sample(rng, G, info, gbs, seq):
    """One random configuration loom eval may accept (it checks the rest)."""
    L, heads, kvh = info["layers"], info["heads"], info["kv_heads"]
    tp = rng.choice([t for t in (1, 2, 4, 8) if heads % t == 0])
    cp = rng.choice([c for c in (1, 1, 2, 4, 8) if seq % (2 * c) == 0])
    pps = [p for p in range(1, L + 1) if G % (tp * cp * p) == 0]
    if not pps:
        return None
    pp = rng.choice(pps)
    dp = G // (tp * cp * pp)
    if gbs % dp:
        return None
    mbs = rng.choice([m for m in (1, 2, 4) if (gbs // dp) % m == 0] or [1])
    a = ["--tp", tp, "--pp", pp, "--dp", dp, "--cp", cp, "--mbs", mbs, "--gbs", gbs, "--seq", seq]
    E = info.get("experts", 0)
    if E:   # MoE parallel folding: expert TP etp dividing tp (etp = tp half the time),
        # expert parallelism over the tp x cp x dp ranks left: ep x etp divides them
        etp = tp if rng.random() < 0.5 else rng.choice([t for t in (1, 2, 4, 8) if tp % t == 0])
        a += ["--etp", etp, "--ep", rng.choice([e for e in (1, 2, 4, 8, 16, 32, 64)
                                                if (tp * cp * dp) % (e * etp) == 0 and E % e == 0])]
    if tp > 1:
        a += ["--sp"] + (["--tp-comm-overlap"] if rng.random() < 0.5 else [])
    if pp > 1:
        vpp = rng.choice([1, 1, 2, 3, 4, 5, 7, 8])
        if L % pp:   # lighter first and last stages
            q = -(-L // pp)
            r = pp * q - L
            if q - (r + 1) // 2 < 1:
                return None
            a += ["--first-stage-layers", q - (r + 1) // 2, "--last-stage-layers", q - r // 2]
            vpp = 1
        elif vpp > 1 and (L % (pp * vpp) or (gbs // dp // mbs) % pp):
            vpp = 1
        a += ["--vpp", vpp]
    rc = rng.choice(["none", "selective", "full", "partial"])
    if rc == "partial":
        a += ["--recompute", "full", "--recompute-layers", rng.randint(1, max(1, L // pp))]
    else:
        a += ["--recompute", rc]
    a += ["--zero", rng.choice([1, 1, 2, 3]) if pp == 1 and dp > 1 else 1]
    return [str(x) for x in a]


def main():
    loom = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    pick = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
    print(f"{'case':26} {'GPUs':>6} {'megatron':>9} {'full':>9} {'accepted':>8} {'best eval':>9} "
          f"{'>0.1% meg':>9} {'worst':>7} {'<full':>6}  best sample")
    total_bad = 0
    for name, model, cluster, gbs, seq in CASES:
        if pick and name not in pick:
            continue
        G = gpus(cluster)
        meg, info = plan(loom, model, cluster, gbs, seq, "megatron")
        full, info_full = plan(loom, model, cluster, gbs, seq, "full")
        info = info or info_full
        if not info:
            print(f"{name:26} {G:6d} nothing fits")
            continue
        rng = random.Random(19)
        ok, best, best_a, bad_meg, bad_full, worst = 0, None, None, 0, 0, 0.0
        tries = 0
        while ok < n and tries < 20 * n:
            tries += 1
            a = sample(rng, G, info, gbs, seq)
            if a is None:
                continue
            rc, out = run([loom, "eval", model, "--cluster", cluster, "--json"] + a)
            if rc:
                continue
            r = json.loads(out)
            if not r["fits"]:
                continue
            ok += 1
            t = r["step_time_s"]
            if best is None or t < best:
                best, best_a = t, a
            if meg and t < meg * (1 - 0.001):
                bad_meg += 1
                worst = max(worst, meg / t - 1)
            if full and t < full * (1 - 1e-9):   # the same configuration: float noise
                bad_full += 1
        total_bad += bad_meg + bad_full
        fmt = lambda x: f"{x:9.4g}" if x else f"{'-':>9}"
        print(f"{name:26} {G:6d} {fmt(meg)} {fmt(full)} {ok:8d} {fmt(best)} {bad_meg:9d} "
              f"{100 * worst:6.1f}% {bad_full:6d}  {' '.join(best_a or [])}")
    print("property holds" if total_bad == 0 else f"property fails: {total_bad} samples beat a plan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
