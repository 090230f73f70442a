#!/usr/bin/env python3
"""bench/training_accuracy.py — loom's step time against published training runs
it was never fitted to, per regime.

The runs are examples/calibration/training-runs.json: 149 records from 17
sources (NeMo and Megatron-Bridge performance tables, torchtitan and
llm-foundry benchmarks, IBM's FMS-FSDP, MLPerf Training v3.1-v5.0 result logs,
the ZeRO, FSDP and MT-NLG papers, technical reports), each with its source. loom's
shipped calibration is fitted on examples/calibration/published-runs.json
(no record here is in it), except each GPU family's GEMM and attention
fractions of peak (Hopper: H100, H200, H800; Blackwell: B200, GB200;
costs/calib.c), which are fitted here to the family's records (Hopper's
with the nine H100 runs of published-runs.json as one more source): those
rows are leave-one-source-out, each source predicted by the fit to the
others (family_fit); the A100 rows are out of sample. The summary
counts a run in every regime it exhibits (REGIMES: dense TP/PP, ZeRO-3/FSDP, FP8,
MoE, >=4k GPUs); each row names its record's own main regime.

Each record becomes one `loom eval` call with the record's configuration:
the model from its shape (a Llama-family config.json written on the fly; a
non-gated MLP of width f becomes a gated one of width 2f/3, which has the same
weights and FLOPs), or the bundled model where the record names one
(DeepSeek-V3, Qwen3 MoE, gpt-oss); the cluster from the GPU and count; TP, PP,
DP, CP, EP, micro-batch, interleaving, sequence parallelism, recomputation,
ZeRO stage / FSDP, FP8 and the framework (Megatron/NeMo, torchtitan/FSDP,
DeepSpeed), and what the source states beyond those: the node network
("internode_gbps_per_node"), a bf16 gradient reduction ("reduce_dtype": `--grad-reduce-bf16`),
hybrid sharding's shard group ("fsdp_shard": `--fsdp-shard`, with
zero_stage "hsdp"), the attention implementation ("attn_impl": llm-foundry's
"flash" is `--attention-kernel fa2-unpad`, "unfused" `--unfused-attention`),
block-level checkpointing of a fraction of the blocks
("recompute_block_fraction"), torchtitan's async TP, torch.compile or eager
PyTorch ("compile": `--elementwise fused|eager`; unstated, torchtitan's
default, eager). What the record leaves
open is assumed and listed. Records are
skipped, with the reason, when they have no step time or throughput, or name
hardware loom does not model (A800, "A100" without a size).

The measured step time is the record's iteration time, else global batch x
sequence / (tokens/s/GPU x GPUs).

usage: bench/training_accuracy.py [path/to/loom] [RUNS.json] [--markdown] [--rows]
(run from the repo root; loom defaults to build/loom)
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

MEGATRON = ("nemo", "megatron", "hai-llm")
# Sources measured with NeMo's / Megatron-Bridge's performance recipes, which
# turn on TP communication overlap with sequence parallelism (NeMo
# nemo/collections/llm/recipes/*: pretrain_recipe_performance adds
# MegatronCommOverlapCallback(tp_comm_overlap=True); the DGX Cloud
# benchmarking recipes and the long-sequence tables run those scripts).
PERF_RECIPES = ("nemo-perf-2407", "mbridge-perf", "nemo-longctx", "dgxc-benchmarking")
FSDP = ("torchtitan", "fsdp", "llm-foundry")

# GPU name in the records -> (device of a cluster file, GPUs per NVLink
# domain, NIC GB/s per GPU, approximated?)
GPUS = {
    "H100-SXM5-80GB": ("H100-SXM5-80GB", 8, 50, False),
    "A100-SXM4-80GB": ("A100-SXM4-80GB", 8, 25, False),
    "A100-SXM4-40GB": ("A100-SXM4-40GB", 8, 25, False),
    "H200-SXM-141GB": ("H200-SXM-141GB", 8, 50, False),
    "H800-SXM5-80GB": ("H800-SXM5-80GB", 8, 50, False),
    "B200": ("B200-HGX-180GB", 8, 50, False),
    "GB200": ("B200-NVL72-186GB", 72, 50, False),
    # Meta's Grand Teton H100: loom's H100-96GB-HBM2e, the 96 GB of HBM2e at
    # 2.4 TB/s that torchtitan's pages state, with the SXM5's tensor peaks
    # (the 500 W limit's clock is not published): the rows stay flagged.
    "H100-96GB-HBM2e (Grand Teton, 500W; not SXM5-80GB)": ("H100-96GB-HBM2e", 8, 50, True),
}

BUNDLED = (("DeepSeek-V3", "deepseek-v3"), ("Qwen3-30B-A3B", "qwen3-30b-a3b"),
           ("Qwen3-235B-A22B", "qwen3-235b-a22b"), ("GPT-OSS 120B", "gpt-oss-120b"))


def measured_step(r):
    if r.get("iteration_time_s"):
        return r["iteration_time_s"]
    tps, gbs, seq = r.get("tokens_per_s_per_gpu"), r.get("global_batch"), r.get("seq_len")
    if tps and gbs and seq and r.get("num_gpus"):
        return gbs * seq / (tps * r["num_gpus"])
    return None


def family(r):
    fw = (r.get("framework") or "").lower()
    if fw.startswith(MEGATRON):
        return "megatron"
    if fw.startswith(FSDP):
        return "torchtitan"
    if fw.startswith("deepspeed"):
        return "deepspeed"
    return None


def model_file(r, tmp, assumed):
    for name, bundled in BUNDLED:
        if r["model"].startswith(name):
            return bundled
    if r.get("moe"):
        return None
    h, ffn, heads = r.get("hidden"), r.get("ffn_hidden"), r.get("heads")
    if not (h and ffn and heads and r.get("layers")):
        return None
    gated = not (r["model"].startswith(("GPT", "MPT", "Nemotron")))
    if not gated:   # the same weights and FLOPs as a gated MLP 2/3 as wide
        ffn = int(round(2 * ffn / 3 / 128)) * 128
        assumed.append("non-gated MLP as gated 2/3 width")
    vocab = r.get("vocab")
    if not vocab:
        vocab = 50257
        assumed.append("vocab 50257")
    kv = r.get("kv_heads") or heads
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": h,
           "intermediate_size": ffn, "num_hidden_layers": r["layers"],
           "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": vocab,
           "max_position_embeddings": max(r.get("seq_len") or 4096, 4096),
           "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    path = os.path.join(tmp, f"model{id(r)}.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def cluster_file(r, tmp):
    dev, domain, nic, approx = GPUS[r["gpu"]]
    n = r["num_gpus"]
    per = min(n, domain)
    while n % per:
        per -= 1
    if r.get("internode_gbps_per_node"):   # the network the source states, shared by a node's GPUs
        nic = r["internode_gbps_per_node"] / 8 / per
    cl = {"format": "loom-cluster/1", "name": f"bench-{dev}-{n}", "nodes": n // per,
          "gpus_per_node": per, "gpu": dev}
    if n // per > 1:
        cl["inter_node"] = {"bandwidth_GBps": nic, "latency_us": 8}
    path = os.path.join(tmp, f"cluster{id(r)}.json")
    with open(path, "w") as f:
        json.dump(cl, f)
    return path, approx


# Megatron-Bridge's MoE token dispatcher, expert-parallel all-to-all
# overlap and FP8 attention per performance-archive section, as the release
# of that section's container sets them in scripts/performance/configs (the
# base configs; the default config_variant, with fallback to V1): section ->
# [(model prefix, GPU, HybridEP dispatcher, EP a2a overlap, FP8 dot-product
# attention)]. What the table leaves out runs Megatron's alltoall dispatcher
# without the overlap, attention in bf16.
#   25.09 = v0.1.0rc3 (2025-10-07), run_script.py:56-109: Qwen3 everywhere
#     and DeepSeek-V3 on GB200/B200 alltoall (token drop, capacity 1.0);
#     DeepSeek-V3 on H100 DeepEP (flex) with EP-comm overlap and delayed
#     wgrad (priced as alltoall with the overlap: loom has no DeepEP).
#   25.11 = v0.2.0 (2025-12-04): qwen3/workload_base_configs.py:71-95 and
#     deepseek/workload_base_configs.py:27-53 put Qwen3 and DeepSeek-V3 on
#     GB200 on hybridep without the overlap; gpt_oss/workload_base_configs
#     .py:42-61 leaves GPT-OSS on alltoall.
#   26.06 = v0.5.0 (2026-06-16): every GB200 MXFP8 MoE preset is hybridep
#     with moe_a2a_overlap (qwen3_workload_base_configs.py:221-237,
#     388-398; deepseek_workload_base_configs.py:80-105;
#     gpt_oss_workload_base_configs.py:211-221); Qwen3-30B-A3B on 16 H100
#     is hybridep without it (qwen3_workload_base_configs.py:470-477). The
#     Qwen3 and GPT-OSS GB200 MXFP8 presets also set
#     fp8_dot_product_attention (TE's FP8 attention), which loom does not
#     price (Megatron-LM has no flag for it): those rows stay out of the
#     Blackwell fit.
MBRIDGE_MOE = {
    "25.09": [("DeepSeek-V3", "H100", False, True, False)],
    "25.11": [("Qwen3", "GB200", True, False, False), ("DeepSeek-V3", "GB200", True, False, False)],
    "26.06": [("Qwen3", "GB200", True, True, True), ("DeepSeek-V3", "GB200", True, True, False),
              ("GPT-OSS", "GB200", True, True, True), ("Qwen3", "H100", True, False, False)],
}


def mbridge_moe(r):
    """(HybridEP dispatcher, EP a2a overlap, FP8 attention) of a
    Megatron-Bridge MoE row."""
    if r.get("source_id") != "mbridge-perf" or not r.get("moe") or (r.get("ep") or 1) < 2:
        return False, False, False
    m = re.search(r"section '(\d\d\.\d\d)", r.get("source", ""))
    for model, gpu, hyb, ovl, fp8_attn in MBRIDGE_MOE.get(m.group(1) if m else "", []):
        if r["model"].startswith(model) and r["gpu"].startswith(gpu):
            return hyb, ovl, fp8_attn
    return False, False, False


def fp8_attention(r):
    return mbridge_moe(r)[2]


def a2a_overlap(r):
    return mbridge_moe(r)[1]


def hybridep(r):
    return mbridge_moe(r)[0]


def eval_args(r, assumed):
    tp, pp, cp, ep = r.get("tp") or 1, r.get("pp") or 1, r.get("cp") or 1, r.get("ep") or 1
    a = ["--tp", tp, "--pp", pp, "--cp", cp, "--ep", ep, "--gbs", r["global_batch"],
         "--seq", r["seq_len"]]
    if r.get("dp"):
        a += ["--dp", r["dp"]]
    if r.get("moe") and tp > 1 and family(r) == "megatron":
        # Megatron-Bridge's MoE performance configs set it for every model
        # (scripts/performance/configs/*/workload_base_configs.py:
        # expert_tensor_parallel_size=1); Megatron-Core then folds the
        # expert-parallel groups over the tensor-parallel ranks
        a += ["--etp", 1]
        assumed.append("expert TP 1 (Megatron-Bridge MoE configs)")
    if r.get("micro_batch"):
        a += ["--mbs", r["micro_batch"]]
    else:
        a += ["--mbs", 1]
        assumed.append("micro-batch 1")
    if r.get("virtual_stages") and pp > 1:
        a += ["--vpp", r["virtual_stages"]]
        # Megatron overlaps the interleaved schedule's p2p unless told not to
        if r.get("overlap_p2p_comm") is False:
            a += ["--no-overlap-p2p"]
    # Megatron-Core's asymmetric split: embedding and loss count as a layer
    # each of the first and last chunk (NeMo's 405B recipe and MLPerf's).
    chunks, L = pp * (r.get("virtual_stages") or 1), r.get("layers") or 0
    if pp > 1 and L and L % chunks and (L + 2) % chunks == 0:
        a += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
        if "embedding/loss" not in (r.get("notes") or ""):
            assumed.append("embedding and loss each count as a layer in the pipeline split")
    fw = family(r)
    sp = r.get("sequence_parallel")
    if sp is None and tp > 1 and fw == "megatron":
        sp = True
        assumed.append("SP (NeMo default with TP)")
    if sp and tp > 1:
        a += ["--sp"]
        # a stated setting, as calib_records_json.c reads the fit's records
        words = ((r.get("notes") or "") + " " + (r.get("source") or "")).lower()
        if "tp comm overlap" in words or "tp-comm-overlap" in words:
            a += ["--tp-comm-overlap"]
        elif fw == "torchtitan" and ("asynctp" in words or "async tp" in words) \
                and "vanilla tp" not in words:
            # torchtitan's async TP (enable_async_tensor_parallel): the
            # all-gather / reduce-scatter of each TP matmul micro-pipelined
            # with it through SymmetricMemory, as TE's userbuffer overlap
            a += ["--tp-comm-overlap"]
        elif r.get("source_id") in PERF_RECIPES:
            a += ["--tp-comm-overlap"]
            assumed.append("TP comm overlap (NeMo performance recipe)")
        elif r.get("source_id") == "mlperf":
            # NVIDIA's NeMo MLPerf submissions run the userbuffer overlap
            # whenever TP > 1 with SP: the v3.1 GPT-3 and v5.0 Llama 3.1
            # 405B records state it, and the v4.1-era GPT-3 configs (TP4
            # PP8 VP4 MBS2) export TP_COMM_OVERLAP=True ("userbuffer backend
            # ... training.model.ub_tp_comm_overlap") in config_*.sh.
            a += ["--tp-comm-overlap"]
            assumed.append("TP comm overlap (NeMo MLPerf configs)")
    rc = (r.get("recompute") or "none").lower()
    frac = r.get("recompute_block_fraction")
    if frac is not None and L:
        # block-level checkpointing of a fraction of the blocks (FMS-FSDP's
        # selective_checkpointing): those blocks rerun whole
        n = round(frac * L / pp)
        a += ["--recompute", "full", "--recompute-layers", n] if n > 0 else ["--recompute", "none"]
    elif r.get("recompute_modules") is not None:
        # Megatron's selective recompute by module (the record's
        # Megatron-Bridge configuration); [] is none
        mods = r["recompute_modules"]
        a += ["--recompute-modules", ",".join(mods)] if mods else ["--recompute", "none"]
    else:
        a += ["--recompute", "full" if rc.startswith("full") else
              "selective" if rc.startswith("selective") else "none"]
    if r.get("cpu_offload_layers"):
        a += ["--cpu-offload-layers", r["cpu_offload_layers"]]
    z = r.get("zero_stage")
    if z in ("fsdp-full-shard", "hsdp"):
        a += ["--zero", 3]
        if z == "hsdp" and r.get("fsdp_shard"):   # stated: the shard group's size
            a += ["--fsdp-shard", r["fsdp_shard"]]
        elif z == "hsdp":
            assumed.append("HSDP as full sharding")
    elif isinstance(z, int):
        a += ["--zero", z]
    elif fw == "megatron" and r.get("distributed_optimizer") is not False:
        a += ["--dist-opt"]
        if r.get("distributed_optimizer") is None:
            assumed.append("distributed optimizer (NeMo default)")
    if r.get("reduce_dtype") == "bf16":   # stated: FSDP MixedPrecision(reduce_dtype=bf16)
        a += ["--grad-reduce-bf16"]
    if r.get("fp8"):
        a += ["--dtype", "fp8"]
    if hybridep(r):
        a += ["--moe-hybridep"]
        assumed.append("HybridEP dispatcher (the section's Megatron-Bridge config)")
    if a2a_overlap(r):
        a += ["--moe-a2a-overlap"]
        assumed.append("EP all-to-all overlap (the section's Megatron-Bridge config)")
    # element-wise ops: eager PyTorch's kernel chains, or fused (torch.compile,
    # Megatron's and TE's kernels); the record's "compile" where its source
    # says, else the framework's default
    fwname = (r.get("framework") or "").lower()
    if r.get("compile") is not None:
        a += ["--elementwise", "fused" if r["compile"] else "eager"]
    elif fwname.startswith("torchtitan"):
        a += ["--elementwise", "eager"]
        assumed.append("eager (torchtitan's training.compile defaults to false)")
    elif fw == "torchtitan":
        # llm-foundry's MPT (LayerNorm, GELU, ALiBi inside the attention
        # kernel) and the FSDP papers' GPT models: each element-wise op is one
        # ATen kernel in eager mode, so nothing runs unfused
        a += ["--elementwise", "fused"]
    if r.get("attn_impl") == "flash":
        # MPT's attn_impl "flash": llmfoundry/models/layers/attention.py
        # flash_attn_fn unpads q, k and v through flash-attn's bert_padding
        # and pads the output back for every batch (at 5e85bd62d, whose
        # sweep.py sets it for the large-scale table's 1b, 3b, 7b and 70b)
        a += ["--attention-kernel", "fa2-unpad"]
    elif r.get("attn_impl") == "unfused":
        # Megatron-LM's kernels before flash attention: the score matrix
        # written and read back through a fused scale-mask-softmax
        a += ["--unfused-attention"]
    elif r.get("attn_impl") == "triton":
        # llm-foundry's own Triton flash attention (flash_attn_triton.py):
        # no kernel of loom's; priced as FlashAttention-2
        assumed.append("llm-foundry's Triton flash attention as FlashAttention-2")
    a += ["--framework", fw, "--memory-headroom", 0]
    return [str(x) for x in a]


# DeepSeek-V3's 61 layers do not split evenly; Megatron-Bridge lays them out
# by hand (--pipeline-model-parallel-layout, E = embedding, t = layer,
# m = the MTP layer, L = the loss), per pipeline chunk count pp·vpp:
# 16 from recipes/deepseek/deepseek_v3.py's layout_map ((16,1), (8,2),
# (4,4)), 32 from the H100 performance config (scripts/performance/
# configs/deepseek/deepseek_llm_pretrain.py).
DSV3_LAYOUTS = {16: "Et*4|(tttt|)*14tmL", 32: "Et|(tt|)*30mL"}

# loom eval's flags -> Megatron-LM's, for a launch line
MEGATRON_FLAGS = {"--tp": "--tensor-model-parallel-size", "--pp": "--pipeline-model-parallel-size",
                  "--cp": "--context-parallel-size", "--ep": "--expert-model-parallel-size",
                  "--etp": "--expert-tensor-parallel-size", "--gbs": "--global-batch-size",
                  "--seq": "--seq-length", "--mbs": "--micro-batch-size",
                  "--cpu-offload-layers": "--cpu-offloading-num-layers"}
MEGATRON_SWITCHES = {"--sp": "--sequence-parallel", "--tp-comm-overlap": "--tp-comm-overlap",
                     "--dist-opt": "--use-distributed-optimizer",
                     "--moe-a2a-overlap": "--overlap-moe-expert-parallel-comm",
                     "--grad-reduce-bf16": "--grad-reduce-in-bf16"}
MEGATRON_PAIRS = {"--moe-hybridep": ["--moe-token-dispatcher-type", "flex",
                                     "--moe-flex-dispatcher-backend", "hybridep"]}


def layout_line(r, args, assumed):
    """loom eval's arguments as a Megatron-LM launch line with DeepSeek-V3's
    pipeline layout (None when the record is not such a run)."""
    if not r["model"].startswith("DeepSeek-V3") or "--pp" not in args:
        return None
    chunks = int(args[args.index("--pp") + 1]) * int(r.get("virtual_stages") or 1)
    if chunks not in DSV3_LAYOUTS or r["layers"] % chunks == 0:
        return None
    # rows the table labels "w/o MTP" ran without the MTP layer: their
    # layout's last stage holds the loss alone
    mtp = 0 if "w/o MTP" in (r.get("notes") or "") else 1
    layout = DSV3_LAYOUTS[chunks] if mtp else DSV3_LAYOUTS[chunks].replace("m", "")
    assumed.append(f"Megatron-Bridge's layout {layout} " +
                   ("(MTP layer priced on the last stage)" if mtp else "(row labelled w/o MTP)"))
    line = ["pretrain_gpt.py", "--num-layers", r["layers"], "--hidden-size", r["hidden"],
            "--num-attention-heads", r["heads"], "--num-experts", r["moe"]["experts"],
            "--moe-router-topk", r["moe"]["top_k"], "--bf16", "--mtp-num-layers", mtp,
            "--hidden-dropout", 0, "--attention-dropout", 0,
            "--pipeline-model-parallel-layout", f'"{layout}"']
    rest, i = [], 0
    while i < len(args):
        a = args[i]
        if a in MEGATRON_FLAGS:
            line += [MEGATRON_FLAGS[a], args[i + 1]]
            i += 2
        elif a in ("--dp", "--vpp", "--recompute"):   # dp: from the GPUs; vpp: the layout's
            if a == "--recompute" and args[i + 1] != "none":
                line += ["--recompute-granularity", args[i + 1]]
            i += 2
        elif a == "--recompute-modules":
            line += ["--recompute-granularity", "selective", "--recompute-modules",
                     *args[i + 1].split(",")]
            i += 2
        elif a == "--dtype":
            line += ["--fp8-format", "hybrid"] if args[i + 1] == "fp8" else []
            i += 2
        elif a in MEGATRON_PAIRS:
            line += MEGATRON_PAIRS[a]
            i += 1
        elif a in MEGATRON_SWITCHES:
            line += [MEGATRON_SWITCHES[a]]
            i += 1
        else:   # --framework, --memory-headroom: loom eval's own
            rest += [a, args[i + 1]]
            i += 2
    return rest + ["--from-megatron", " ".join(str(x) for x in line)]


def eval_command(loom, r, tmp):
    """(loom eval argv, cluster's device, assumptions, None) or (None, None,
    None, reason skipped)."""
    if measured_step(r) is None:
        return None, None, None, "no step time or throughput"
    if r.get("gpu") not in GPUS:
        return None, None, None, f"hardware not modelled ({r.get('gpu')})"
    if not r.get("global_batch") or not r.get("seq_len") or family(r) is None:
        return None, None, None, "configuration incomplete"
    assumed = []
    model = model_file(r, tmp, assumed)
    if model is None:
        return None, None, None, "model shape incomplete"
    cl, approx = cluster_file(r, tmp)
    if approx:
        assumed.append("500 W power limit not modelled (SXM5 tensor peaks)")
    ev = eval_args(r, assumed)
    ev = layout_line(r, ev, assumed) or ev
    return [loom, "eval", model, "--cluster", cl, *ev, "--json"], GPUS[r["gpu"]][0], assumed, None


def run_eval(args, calib=None, fits=None):
    """loom eval's step time (None when it refuses), with a calibration file;
    fits, a list, gets whether loom predicts the configuration fits in memory."""
    p = subprocess.run(args + (["--calib", calib] if calib else []), capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1][:120] if p.stderr.strip() else "no output"
    out = json.loads(p.stdout)
    if fits is not None:
        fits.append(out["fits"])
    return out["step_time_s"], None


# ---- each family's GEMM and attention fractions, leave one source out ---------
#
# loom's published-runs fit (published-runs.json) sees no Blackwell run and
# pins Hopper's GEMM and attention fractions on eight GEMM-bound runs of two
# sources, which cannot tell the two apart; inheriting Hopper's leaves the
# GEMM-bound Blackwell runs too fast and the attention-bound ones too slow
# (costs/calib.c). Each family's large-GEMM and fused-attention fractions of
# peak are therefore fitted here, to the family's records, and loom ships the
# fit to all of them (calib.c BLACKWELL_*, HOPPER_*); the memory, link and
# overlap fractions stay the published-runs fit's. So that no row of a
# family below is in sample, each is predicted leave-one-source-out: with
# the fractions fitted to the family's records of the other sources. Runs on
# approximated hardware (Grand Teton) and runs whose attention ran in FP8
# are predicted, not fitted. The fit is calib_fit.c's: cyclic golden-section
# search per parameter inside its range, Huber loss on |ln(pred / meas)|
# (quadratic to 5%, linear beyond), from the shipped values.
FAMILIES = (
    ("Blackwell", "BLACKWELL", ("B200-HGX-180GB", "B200-NVL72-186GB")),
    ("Hopper", "HOPPER", ("H100-SXM5-80GB", "H200-SXM-141GB", "H800-SXM5-80GB",
                          "H100-96GB-HBM2e")),
)
FIT_PARAMS = (("gemm_eff_max", 0.30, 0.95), ("attn_eff", 0.20, 0.90))
FIT_SWEEPS, GOLDEN_ITERS, HUBER = 3, 12, 0.05


def family_of(dev):
    return next((f for f in FAMILIES if dev in f[2]), None)


def write_calibs(devices, theta, tmp, tag):
    """A loom-calib/1 file per device with the two fractions at theta."""
    calib = {}
    for dev in devices:
        calib[dev] = os.path.join(tmp, f"{tag}-{dev}.json")
        with open(calib[dev], "w") as f:
            json.dump({"format": "loom-calib/1", "device": dev,
                       **dict(zip((p[0] for p in FIT_PARAMS), theta))}, f)
    return calib


# loom's own calibration set holds Hopper runs of one more source (the
# Megatron-LM README's weak-scaling table, nine H100 runs): the Hopper fit
# sees them too, through `loom calibrate --evaluate`, as one more source.
PUBLISHED_RUNS = "examples/calibration/published-runs.json"
PUBLISHED_SOURCE = "published-runs.json"
PUBLISHED_IN = {"Hopper": "H100-SXM5-80GB"}


def job_times(job, calib):
    """[(predicted s or None, measured s)] of one job under calib (device -> file):
    ("eval", (argv, measured), device) is one loom eval; ("published", (loom,),
    device) the device's records of published-runs.json."""
    kind, payload, dev = job
    if kind == "eval":
        return [(run_eval(payload[0], calib[dev])[0], payload[1])]
    p = subprocess.run([payload[0], "calibrate", PUBLISHED_RUNS, "--evaluate", "--json",
                        "--calib", calib[dev]], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench/training_accuracy.py: loom calibrate --evaluate failed:\n{p.stderr}")
    return [(r["predicted_s"], r["measured_s"]) for r in json.loads(p.stdout)["records"]
            if r["gpu"] == dev]


def family_loss(jobs, devices, theta, tmp, pool):
    """Σ Huber(|ln pred/meas|) over the runs of jobs (job_times) at theta."""
    calib = write_calibs(devices, theta, tmp, "fit")
    loss = 0.0
    for pairs in pool.map(lambda j: job_times(j, calib), jobs):
        for t, meas in pairs:
            e = abs(math.log(t / meas)) if t else 1.0
            loss += e * e if e <= HUBER else 2 * HUBER * e - HUBER * HUBER
    return loss


def family_fit(jobs, devices, start, tmp, pool):
    theta = list(start)
    phi = (math.sqrt(5) - 1) / 2
    for _ in range(FIT_SWEEPS):
        for k, (_, lo, hi) in enumerate(FIT_PARAMS):
            def at(v):
                th = list(theta)
                th[k] = v
                return family_loss(jobs, devices, th, tmp, pool)
            a, b = lo, hi
            x1, x2 = b - phi * (b - a), a + phi * (b - a)
            f1, f2 = at(x1), at(x2)
            for _ in range(GOLDEN_ITERS):
                if f1 <= f2:
                    b, x2, f2 = x2, x1, f1
                    x1 = b - phi * (b - a)
                    f1 = at(x1)
                else:
                    a, x1, f1 = x1, x2, f2
                    x2 = a + phi * (b - a)
                    f2 = at(x2)
            best, fb = (x1, f1) if f1 <= f2 else (x2, f2)
            if fb < at(theta[k]):
                theta[k] = best
    return theta


def shipped_fit(macro):
    """The fractions loom ships for a family (costs/calib.c's defines)."""
    text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "costs",
                             "calib.c")).read()
    return [float(re.search(rf"#define {macro}_{k} ([0-9.]+)", text).group(1))
            for k in ("GEMM_EFF", "ATTN_EFF")]


def summary(errs):
    a = [abs(e) for e in errs]
    return f"{len(a)} | {100 * statistics.median(a):.1f}% | {100 * max(a):.1f}%" if a else "0 | – | –"


def _moe(r):
    return bool(r.get("moe")) or r["regime"] == "moe"


# The regimes the issue names, each a test on a record; a run is in all it
# passes. ZeRO-3/FSDP is the record's own regime, which also holds the ZeRO
# papers' stage 0-2 runs (DeepSpeed's data-parallel family).
REGIMES = [
    ("dense TP/PP (TP or PP > 1, no MoE)",
     lambda r: not _moe(r) and (r.get("tp") or 1) * (r.get("pp") or 1) > 1),
    ("ZeRO-3/FSDP", lambda r: r["regime"] == "zero3-fsdp"),
    ("FP8", lambda r: bool(r.get("fp8"))),
    ("MoE", _moe),
    (">=4k GPUs", lambda r: r["num_gpus"] >= 4096),
]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    loom = args[0] if args else "build/loom"
    runs = args[1] if len(args) > 1 else "examples/calibration/training-runs.json"
    if not os.access(loom, os.X_OK):
        sys.exit(f"bench/training_accuracy.py: {loom} is not an executable (build first)")
    recs = json.load(open(runs))["records"]
    rows, skipped, unfit = [], [], []
    members = {f[0]: [] for f in FAMILIES}
    fits = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        cmds = [(r, *eval_command(loom, r, tmp)) for r in recs]
        for r, args, dev, assumed, why in cmds:
            if why:
                skipped.append((r, why))
                continue
            fit_flag = []
            t, why = run_eval(args, fits=fit_flag)
            if fit_flag and not fit_flag[0]:
                unfit.append(r)
            if why:
                skipped.append((r, "loom eval refused: " + why))
            elif family_of(dev):
                members[family_of(dev)[0]].append((r, args, dev, assumed))
            else:
                rows.append((r, t, t / measured_step(r) - 1, assumed))
        # each family: each source predicted by the fit to the others. A run
        # whose attention ran in FP8 would pull the bf16 attention fraction
        # up, and approximated hardware would pull both: priced, not fitted
        for name, macro, devices in FAMILIES:
            sel = members[name]
            pub = [("published", (loom,), PUBLISHED_IN[name])] if name in PUBLISHED_IN else []

            def jobs(part, with_pub=True):
                return [("eval", (a, measured_step(r)), d) for r, a, d, _ in part
                        if not fp8_attention(r) and not GPUS[r["gpu"]][3]] + (pub if with_pub else [])
            shipped = shipped_fit(macro)
            fit_all = family_fit(jobs(sel), devices, shipped, tmp, pool)
            folds, pub_errs = {}, []
            if pub:   # the calibration set's runs, predicted by the fit without them
                theta = family_fit(jobs(sel, False), devices, shipped, tmp, pool)
                folds[PUBLISHED_SOURCE] = theta
                calib = write_calibs(devices, theta, tmp, "loso")
                pub_errs = [t / m - 1 for t, m in job_times(pub[0], calib)]
            for src in sorted({r["source_id"] for r, *_ in sel}):
                theta = family_fit(jobs([m for m in sel if m[0]["source_id"] != src]), devices,
                                   shipped, tmp, pool)
                folds[src] = theta
                calib = write_calibs(devices, theta, tmp, "loso")
                for r, args, dev, assumed in sel:
                    if r["source_id"] != src:
                        continue
                    t, _ = run_eval(args, calib[dev])
                    note = (f"{name} fit without this source: GEMM {theta[0]:.3f}, "
                            f"attention {theta[1]:.3f}")
                    if fp8_attention(r):
                        note = ("FP8 attention in the run (the section's Megatron-Bridge config), "
                                "priced in bf16 and left out of the fits; " + note)
                    rows.append((r, t, t / measured_step(r) - 1, assumed + [note]))
            n_runs = sum(1 for j in jobs(sel) if j[0] == "eval") + len(pub_errs)
            fits[name] = (n_runs, fit_all, shipped, folds, pub_errs)
    rows.sort(key=lambda row: recs.index(row[0]))

    def approx(row):
        return GPUS[row[0]["gpu"]][3]

    print(f"# Training accuracy: {len(rows)} published runs, out of sample\n")
    print(f"Records: `{runs}`; regenerate with `python3 bench/training_accuracy.py`.\n")
    print("Every row is out of sample. The shipped calibration is fitted to "
          "`examples/calibration/published-runs.json`, except each GPU family's GEMM and "
          "attention fractions of peak (Hopper: H100, H200, H800; Blackwell: B200, GB200; "
          "costs/calib.c), which are fitted here, so those rows are leave-one-source-out: each "
          "source predicted by the fit to the other sources' records of the family.\n")
    for name, (n, fit_all, shipped, folds, pub_errs) in fits.items():
        print(f"{name} fit to all {n} records: GEMM {fit_all[0]:.3f}, attention "
              f"{fit_all[1]:.3f} (shipped: {shipped[0]:g}, {shipped[1]:g}); without "
              + ", ".join(f"{k}: {v[0]:.3f}, {v[1]:.3f}" for k, v in folds.items()) + ".\n")
        if pub_errs:
            a = [abs(e) for e in pub_errs]
            print(f"{name} runs of `{PUBLISHED_RUNS}` (in the fit above, not in the tables "
                  f"below), predicted by the fit without them: {len(a)} runs, median |err| "
                  f"{100 * statistics.median(a):.1f}%, max {100 * max(a):.1f}%.\n")
    print("A run counts in every regime it exhibits (an FP8 Llama at TP4 PP8 on 6,144 GPUs is "
          "dense TP/PP, FP8 and >=4k GPUs); the rows below name its record's main regime.\n")
    print("| regime | runs | median \\|err\\| | max \\|err\\| |")
    print("| --- | ---: | ---: | ---: |")
    for g, member in REGIMES:
        print(f"| {g} | {summary([e for r, _, e, _ in rows if member(r) and not approx((r,))])} |")
    exact = [e for row in rows if not approx(row) for e in [row[2]]]
    print(f"| all (SXM devices) | {summary(exact)} |")
    print(f"| Grand Teton H100 96 GB (approximated) | "
          f"{summary([row[2] for row in rows if approx(row)])} |")
    print("\n| source | runs | median \\|err\\| | max \\|err\\| |")
    print("| --- | ---: | ---: | ---: |")
    for s in sorted({r["source_id"] if r.get("source_id") else r["source"][:40] for r, *_ in rows}):
        sel = [e for r, _, e, _ in rows if (r.get("source_id") or r["source"][:40]) == s]
        print(f"| {s} | {summary(sel)} |")
    if "--rows" in sys.argv:
        print("\n| regime | model | GPU × n | tp/pp/dp/cp/ep | measured s | predicted s | error | assumed |")
        print("| --- | --- | --- | --- | ---: | ---: | ---: | --- |")
        for r, pred, e, assumed in rows:
            par = "/".join(str(r.get(k) or 1) for k in ("tp", "pp", "dp", "cp", "ep"))
            print(f"| {r['regime']} | {r['model']} | {r['gpu'][:16]} × {r['num_gpus']} | {par} | "
                  f"{measured_step(r):.3f} | {pred:.3f} | {100 * e:+.1f}% | {'; '.join(assumed)} |")
    print(f"\nloom predicts {len(unfit)} of these {len(rows)} published configurations would not fit "
          "their GPUs' memory (no headroom; each is priced all the same): "
          + ", ".join(f"{r['model']} on {r['num_gpus']} {r['gpu'].split(' ')[0]}" for r in unfit) + ".")
    print(f"\nSkipped {len(skipped)}:")
    for r, why in skipped:
        print(f"- {r['model']} ({r.get('source_id') or r['source'][:40]}): {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
