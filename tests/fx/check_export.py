"""check_export.py — assertions for tests/fx_export.sh on `loom inspect --json`
outputs (run with /usr/bin/python3; exits 1 with the differences).

  same A.json B.json
      A (inspect of a torch.fx export) and B (inspect of the equivalent HF
      config.json) agree on parameters, FLOPs and activation bytes, in
      total and per layer.
  shard A.json B.json
      `loom shard --json` on the export (A) and on the config (B) find the
      same optimum: objective and memory per GPU equal, and the same
      strategy for every op when the two layers list the same ops.
  square_mlp A.json H F L B S
      A is tests/fx/misc_models.py:SquareMLP exported with hidden H, inner
      F, L blocks, batch B, sequence S: per-block params, forward FLOPs and
      saved bytes equal the hand computation below (graph.c's FLOP rules).
"""

import json
import sys

TOTALS = ("params", "params_embedding", "layers", "flops_fwd", "flops_bwd",
          "flops_per_token_fwd", "flops_per_token_train", "activation_bytes_per_layer",
          "activation_bytes")
PER_LAYER = ("params", "flops_fwd", "flops_bwd", "activation_bytes")


def load(path):
    with open(path) as f:
        return json.load(f)


def same(a_path, b_path):
    a, b = load(a_path), load(b_path)
    bad = []
    for k in TOTALS:
        if a.get(k) != b.get(k):
            bad.append("%s: export %s, config %s" % (k, a.get(k), b.get(k)))
    la, lb = a.get("per_layer", []), b.get("per_layer", [])
    if len(la) != len(lb):
        bad.append("layer slots: export %d, config %d" % (len(la), len(lb)))
    for x, y in zip(la, lb):
        for k in PER_LAYER:
            if x.get(k) != y.get(k):
                bad.append("layer %s %s: export %s, config %s" % (x.get("layer"), k, x.get(k),
                                                                  y.get(k)))
    return bad


def shard(a_path, b_path):
    a, b = load(a_path), load(b_path)
    bad = []
    for k in ("status", "memory_bytes_per_gpu", "param_bytes_per_gpu", "act_bytes_per_gpu"):
        if a.get(k) != b.get(k):
            bad.append("%s: export %s, config %s" % (k, a.get(k), b.get(k)))
    oa, ob = a.get("objective_s", 0), b.get("objective_s", 0)
    if abs(oa - ob) > 1e-9 * max(abs(oa), abs(ob)):
        bad.append("objective_s: export %r, config %r" % (oa, ob))
    sa = [o["strategy"] for o in a.get("ops", [])]
    sb = [o["strategy"] for o in b.get("ops", [])]
    if len(sa) == len(sb) and sa != sb:
        bad.append("strategies: export %s, config %s" % (sa, sb))
    return bad


def square_mlp(path, h, f, layers, b, s):
    """Per block: LayerNorm 5·bsh FLOPs, einsum 2·bs·h·f, GELU 8·bs·f, down
    2·bs·f·h, add bsh, square linear 2·bs·h·h + bsh (bias), add bsh.
    Params 2h + h·f + f·h + h·h + h. Saved (bf16, 2 bytes): the norm input,
    the einsum input, the GELU input, the down input, the square linear's
    input: 2·(3·bsh + 2·bs·f)."""
    a = load(path)
    t = b * s
    want = {
        "flops_fwd": 5 * t * h + 2 * t * h * f + 8 * t * f + 2 * t * f * h + t * h
        + 2 * t * h * h + t * h + t * h,
        "params": 2 * h + 2 * h * f + h * h + h,
        "activation_bytes": 2 * (3 * t * h + 2 * t * f),
    }
    bad = []
    blocks = [x for x in a["per_layer"] if 1 <= x["layer"] <= layers]
    if len(blocks) != layers:
        bad.append("expected %d block layers, found %d" % (layers, len(blocks)))
    for x in blocks:
        for k, v in want.items():
            if x[k] != v:
                bad.append("layer %d %s: export %s, hand computation %s" % (x["layer"], k, x[k],
                                                                            v))
    return bad


def main(argv):
    if len(argv) >= 3 and argv[0] == "same":
        bad = same(argv[1], argv[2])
    elif len(argv) == 3 and argv[0] == "shard":
        bad = shard(argv[1], argv[2])
    elif len(argv) == 7 and argv[0] == "square_mlp":
        bad = square_mlp(argv[1], *map(int, argv[2:]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for line in bad:
        print("  " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
