/*
 * cmd_eval.c — `loom eval MODEL --cluster C --tp T --pp P --dp D …`: the
 * predicted step time, throughput, MFU and per-stage memory of one
 * Megatron-style configuration (costs/eval.h), as text or one JSON object.
 *
 * Options live in one table (eval_opts[], options.h) mapping a flag to a
 * field of eval_args; adding one (e.g. --from-megatron) is a row there plus
 * its use in loom_cmd_eval, and --help lists it from the row. The model graph is built for one micro-batch: batch =
 * --mbs, --seq, --dtype, fused attention unless --unfused-attention.
 */
#include <cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/compute.h"
#include "costs/eval.h"
#include "costs/recompute.h"
#include "base/json.h"
#include "graph/model.h"
#include "planner/cli/cli.h"
#include "planner/import/megatron_import.h"

typedef struct {
    const char *model, *cluster, *calib, *profile, *from_megatron, *recompute_modules;
    loom_parallel p;
    int mode;   /* 0 train (this command); serve goes to cmd_eval_serve.c */
    int32_t attn;   /* loom_attn_kernel */
    int32_t elementwise;   /* loom_elementwise_mode */
    bool json, unfused, no_grad_overlap, no_p2p_overlap, dp_given, gbs_given, seq_given, mbs_given, zero_given,
        dist_opt_given, attn_given, elementwise_given, split_embedding, split_loss, recompute_given,
        ops;
    double memory_headroom;   /* < 0: the cluster's */
} eval_args;

static void eval_args_init(void *p)
{
    eval_args *a = p;
    memset(a, 0, sizeof *a);
    loom_parallel_init(&a->p);
    a->memory_headroom = -1;
}

static const loom_cli_choice recompute_choices[] = {{"none", LOOM_RECOMPUTE_NONE, false},
                                                    {"selective", LOOM_RECOMPUTE_SELECTIVE, false},
                                                    {"full", LOOM_RECOMPUTE_FULL, false},
                                                    {NULL, 0, false}};
static const loom_cli_choice dtype_choices[] = {{"bf16", LOOM_DTYPE_BF16, false},
                                                {"fp16", LOOM_DTYPE_FP16, false},
                                                {"fp8", LOOM_DTYPE_FP8, false},
                                                {NULL, 0, false}};

static const loom_cli_choice attention_choices[] = {{"fused", LOOM_ATTN_FUSED, false},
                                                    {"fa2", LOOM_ATTN_FA2, false},
                                                    {"fa2-unpad", LOOM_ATTN_FA2_UNPAD, false},
                                                    {NULL, 0, false}};

static const loom_cli_choice elementwise_choices[] = {{"fused", LOOM_ELEMENTWISE_FUSED, false},
                                                      {"eager", LOOM_ELEMENTWISE_EAGER, false},
                                                      {NULL, 0, false}};

static const loom_cli_choice framework_choices[] = {{"megatron", LOOM_FRAMEWORK_MEGATRON, false},
                                                    {"deepspeed", LOOM_FRAMEWORK_DEEPSPEED, false},
                                                    {"torchtitan", LOOM_FRAMEWORK_TORCHTITAN, false},
                                                    {NULL, 0, false}};

#define F(f) LOOM_CLI_FIELD(eval_args, f)
#define DEGREE(opt, f, what) \
    {.name = opt, .kind = LOOM_CLI_INT, .field = F(p.f), .lo = 1, .hi = 1 << 20, .metavar = "N", \
     .help = what}
static const loom_cli_choice mode_choices[] = {{"train", 0, false}, {"serve", 1, false},
                                               {NULL, 0, false}};

static const loom_cli_option eval_opts[] = {
    {.name = "--mode", .kind = LOOM_CLI_ENUM, .field = F(mode), .choices = mode_choices,
     .metavar = "M", .help = "train (this command); serve: a serving deployment\n"
                             "(loom eval --mode serve -h lists its options)"},
    {.name = "--cluster", .kind = LOOM_CLI_STR, .field = F(cluster), .metavar = "C",
     .help = "a preset (dgx-h100-x16, dgx-a100-80g-x4, …) or a cluster file"},
    DEGREE("--tp", tp, "tensor-parallel degree"),
    DEGREE("--pp", pp, "pipeline-parallel degree (stages)"),
    {.name = "--dp", .kind = LOOM_CLI_INT, .field = F(p.dp), .given = F(dp_given), .lo = 1,
     .hi = 1 << 24, .metavar = "N", .help = "data-parallel degree", .def = "GPUs / (tp·pp·cp)"},
    DEGREE("--cp", cp, "context-parallel degree"),
    DEGREE("--ep", ep, "expert-parallel degree"),
    {.name = "--etp", .kind = LOOM_CLI_INT, .field = F(p.etp), .lo = 1, .hi = 1 << 20,
     .metavar = "N", .help = "tensor-parallel degree of the experts", .def = "--tp"},
    {.name = "--mbs", .kind = LOOM_CLI_INT, .field = F(p.mbs), .given = F(mbs_given), .lo = 1,
     .hi = LOOM_MODEL_MAX_BATCH, .metavar = "B",
     .help = "micro-batch, in sequences (a loom graph file: its own batch)"},
    {.name = "--gbs", .kind = LOOM_CLI_SIZE, .field = F(p.gbs), .given = F(gbs_given), .lo = 1,
     .hi = (int64_t)1 << 40, .metavar = "G",
     .help = "global batch, in sequences", .def = "256, as loom plan"},
    {.name = "--seq", .kind = LOOM_CLI_SIZE, .field = F(p.seq), .given = F(seq_given), .lo = 1,
     .hi = LOOM_MODEL_MAX_SEQ, .metavar = "S", .help = "sequence length",
     .def = "4096 as loom plan, capped at n_positions (GPT-2)"},
    {.name = "--sp", .kind = LOOM_CLI_FLAG, .field = F(p.sp), .help = "sequence parallelism"},
    {.name = "--recompute", .kind = LOOM_CLI_ENUM, .field = F(p.recompute),
     .given = F(recompute_given), .choices = recompute_choices, .metavar = "R", .help = "activation recomputation"},
    {.name = "--recompute-modules", .kind = LOOM_CLI_STR, .field = F(recompute_modules),
     .metavar = "LIST",
     .help = "selective recompute of Megatron's modules (implies --recompute selective;\n"
             "refused beside --recompute none or full):\n"
             "comma-separated core_attn, layernorm, moe_act, mla_up_proj, mlp, moe,\n"
             "shared_experts (Megatron's --recompute-modules)", .def = "core_attn"},
    {.name = "--cpu-offload-layers", .kind = LOOM_CLI_INT, .field = F(p.cpu_offload_layers),
     .lo = 0, .hi = 1 << 20, .metavar = "N",
     .help = "Megatron's CPU activation offloading (--cpu-offloading-num-layers): the first N\n"
             "blocks' activations wait in host memory for the backward, streamed over the\n"
             "GPU's host link (PCIe, NVLink-C2C) beside compute; needs --pp 1, no recompute",
     .def = "0: none"},
    {.name = "--recompute-layers", .kind = LOOM_CLI_INT, .field = F(p.recompute_layers), .lo = 0,
     .hi = 1 << 20, .metavar = "N",
     .help = "--recompute full: only the first N blocks of each stage (of each virtual chunk with --vpp)", .def = "0: all"},
    {.name = "--zero", .kind = LOOM_CLI_INT, .field = F(p.zero), .given = F(zero_given), .lo = 0,
     .hi = 3, .metavar = "Z", .help = "ZeRO stage over the data-parallel group",
     .def = "1 as loom plan (0 with --dist-opt)"},
    {.name = "--fsdp-shard", .kind = LOOM_CLI_INT, .field = F(p.fsdp_shard), .lo = 1,
     .hi = 1 << 24, .metavar = "N",
     .help = "hybrid sharding (HSDP): ZeRO state sharded over groups of N data-parallel\n"
             "ranks and replicated across them (N divides --dp)", .def = "all of dp"},
    {.name = "--dist-opt", .kind = LOOM_CLI_FLAG, .field = F(p.dist_opt), .given = F(dist_opt_given),
     .help = "Megatron distributed optimizer"},
    {.name = "--vpp", .kind = LOOM_CLI_INT, .field = F(p.vpp), .lo = 1, .hi = 1 << 20,
     .metavar = "V", .help = "interleaved schedule with V model chunks per pipeline rank"},
    {.name = "--first-stage-layers", .kind = LOOM_CLI_INT, .field = F(p.first_stage_layers),
     .lo = 0, .hi = 1 << 20, .metavar = "N",
     .help = "uneven pipeline: blocks on the first stage, the others split evenly",
     .def = "0: an even split"},
    {.name = "--account-for-embedding-in-pipeline-split", .kind = LOOM_CLI_FLAG,
     .field = F(split_embedding),
     .help = "Megatron's split: the embedding counts as one layer of the first chunk"},
    {.name = "--account-for-loss-in-pipeline-split", .kind = LOOM_CLI_FLAG, .field = F(split_loss),
     .help = "Megatron's split: the output layer and loss count as one layer of the last chunk"},
    {.name = "--last-stage-layers", .kind = LOOM_CLI_INT, .field = F(p.last_stage_layers),
     .lo = 0, .hi = 1 << 20, .metavar = "N",
     .help = "uneven pipeline: blocks on the last stage, the others split evenly",
     .def = "0: an even split"},
    {.name = "--dtype", .kind = LOOM_CLI_ENUM, .field = F(p.dtype), .choices = dtype_choices,
     .metavar = "T", .help = "compute dtype: bf16, fp16 or fp8"},
    {.name = "--unfused-attention", .kind = LOOM_CLI_FLAG, .field = F(unfused),
     .help = "eager attention (s² activations) instead of flash attention"},
    {.name = "--tp-comm-overlap", .kind = LOOM_CLI_FLAG, .field = F(p.tp_comm_overlap),
     .help = "overlap TP collectives with GEMMs (needs --sp)"},
    {.name = "--no-overlap-grad-reduce", .kind = LOOM_CLI_FLAG, .field = F(no_grad_overlap),
     .help = "do not overlap the DP gradient reduction with backward"},
    {.name = "--no-overlap-p2p", .kind = LOOM_CLI_FLAG, .field = F(no_p2p_overlap),
     .help = "interleaved schedule: blocking stage-to-stage transfers (Megatron's\n"
             "--no-overlap-p2p-communication; by default they overlap compute)"},
    {.name = "--moe-a2a-overlap", .kind = LOOM_CLI_FLAG, .field = F(p.moe_a2a_overlap),
     .help = "expert all-to-alls of one micro-batch beside another's compute (Megatron's\n"
             "--overlap-moe-expert-parallel-comm; needs --ep > 1, --vpp with --pp > 1)"},
    {.name = "--moe-hybridep", .kind = LOOM_CLI_FLAG, .field = F(p.moe_hybridep),
     .help = "the HybridEP token dispatcher (Megatron's --moe-token-dispatcher-type flex\n"
             "--moe-flex-dispatcher-backend hybridep): all-to-alls write every peer at\n"
             "once, one latency each, and a token crosses to another node once, forwarded\n"
             "there over NVLink; needs --ep > 1"},
    {.name = "--framework", .kind = LOOM_CLI_ENUM, .field = F(p.framework),
     .choices = framework_choices, .metavar = "F",
     .help = "megatron, deepspeed or torchtitan: gradient and reduce dtypes, ZeRO-3 gathers, "
             "optimizer state layout", .def = "megatron"},
    {.name = "--attention-kernel", .kind = LOOM_CLI_ENUM, .field = F(attn), .given = F(attn_given),
     .choices = attention_choices, .metavar = "K",
     .help = "fused (Transformer Engine: cuDNN / FA3), fa2 (PyTorch SDPA, flash-attn 2) or\n"
             "fa2-unpad (flash-attn 2's varlen kernel behind its bert_padding gathers, as\n"
             "llm-foundry's MPT runs it): the attention kernel priced",
     .def = "fused with megatron, else fa2"},
    {.name = "--elementwise", .kind = LOOM_CLI_ENUM, .field = F(elementwise),
     .given = F(elementwise_given), .choices = elementwise_choices, .metavar = "E",
     .help = "fused (Transformer Engine / Megatron kernels, torch.compile) or eager\n"
             "(PyTorch without torch.compile: RMSNorm, rotary embedding and SwiGLU as\n"
             "chains of kernels, each a pass through HBM)",
     .def = "eager with torchtitan (its compile defaults to off), else fused"},
    {.name = "--memory-headroom", .kind = LOOM_CLI_NUM, .field = F(memory_headroom), .min = 0,
     .max = 1024, .metavar = "H", .help = "HBM left free: a fraction (< 1) or GiB (>= 1)", .def = "0.05 (the cluster's)"},
    {.name = "--grad-reduce-bf16", .kind = LOOM_CLI_FLAG, .field = F(p.grad_reduce_bf16),
     .help = "reduce gradients in bf16 (default fp32, as Megatron); under Megatron its\n"
             "gradient buffers are then bf16 too: 2 bytes a parameter, not 4"},
    {.name = "--calib", .kind = LOOM_CLI_STR, .field = F(calib), .metavar = "FILE",
     .help = "calibrated efficiencies (loom calibrate)", .def = "shipped values"},
    {.name = "--profile", .kind = LOOM_CLI_STR, .field = F(profile), .metavar = "DB",
     .help = "measured op times (loom-profile) for this cluster's GPU"},
    {.name = "--json", .kind = LOOM_CLI_FLAG, .field = F(json), .help = "one JSON object on stdout"},
    {.name = "--ops", .kind = LOOM_CLI_FLAG, .field = F(ops),
     .help = "where the bottleneck stage's time goes, by kind of work (GEMMs, attention,\n"
             "norms, MoE routing, exposed communication, …), forward, backward and\n"
             "recompute (--json always has it: \"work\")"},
    {.name = "--from-megatron", .kind = LOOM_CLI_STR, .field = F(from_megatron), .metavar = "L",
     .help = "the configuration of a Megatron-LM launch line instead of the\n"
             "options above: the text, @FILE or a script path (docs/export.md);\n"
             "without MODEL the model is built from its shape arguments; any\n"
             "--pipeline-model-parallel-layout places the layers as written;\n"
             "configuration options beside it are refused"},
};
#undef DEGREE

const loom_cli_spec loom_cli_spec_eval = {
    .cmd = "eval",
    .usage =
        "usage: loom eval MODEL --cluster C --tp T --pp P [--dp D] [--cp C] [--ep E] --mbs B --gbs G\n"
        "                 [--seq S] [--sp] [--recompute none|selective|full] [--recompute-layers N]\n"
        "                 [--zero 0|1|2|3] [--fsdp-shard N] [--dist-opt] [--vpp V]\n"
        "                 [--dtype bf16|fp16|fp8]\n"
        "                 [--first-stage-layers N] [--last-stage-layers N] [--etp N]\n"
        "                 [--recompute-modules LIST] [--cpu-offload-layers N]\n"
        "                 [--unfused-attention] [--tp-comm-overlap]\n"
        "                 [--no-overlap-grad-reduce] [--no-overlap-p2p] [--moe-a2a-overlap]\n"
        "                 [--moe-hybridep] [--grad-reduce-bf16]\n"
        "                 [--framework megatron|deepspeed|torchtitan]\n"
        "                 [--attention-kernel fused|fa2] [--elementwise fused|eager]\n"
        "                 [--calib FILE] [--profile DB] [--json] [--ops]\n"
        "       loom eval [MODEL] --cluster C --from-megatron \"torchrun ... pretrain_gpt.py ...\"\n"
        "       loom eval MODEL --cluster C --mode serve …   (serving: loom eval --mode serve -h)\n",
    .about =
        "Predicts one training step of a Megatron-style configuration: step time and where it\n"
        "goes (compute, tensor-parallel comm, pipeline bubble, p2p, gradient sync, optimizer;\n"
        "--ops: by kind of work), tokens/s, model and hardware TFLOP/s per GPU, MFU, and memory\n"
        "per GPU of every stage.\n",
    .epilogue =
        "Model FLOPs count attention in full (non-causal), as Korthikanti et al. and Megatron-LM.\n",
    .opts = eval_opts,
    .n_opts = sizeof eval_opts / sizeof eval_opts[0],
    .pos = {.metavar = "MODEL", .field = F(model), .max = 1, .noun = "MODEL",
            .help = "a path or bundled model name (examples/models/)"},
    .args_size = sizeof(eval_args),
    .init = eval_args_init,
};
#undef F

/* The first option that sets part of the parallel configuration, or NULL
 * (an option given at its default value cannot be told apart, nor matters). */
static const char *configuration_option(const eval_args *a)
{
    loom_parallel d;
    loom_parallel_init(&d);
    const loom_parallel *p = &a->p;
    const struct { bool set; const char *name; } opts[] = {
        {p->tp != d.tp, "--tp"}, {p->pp != d.pp, "--pp"}, {a->dp_given, "--dp"},
        {p->cp != d.cp, "--cp"}, {p->ep != d.ep, "--ep"}, {p->etp != d.etp, "--etp"},
        {p->vpp != d.vpp, "--vpp"}, {a->mbs_given, "--mbs"}, {a->gbs_given, "--gbs"},
        {a->seq_given, "--seq"}, {p->sp, "--sp"}, {a->recompute_given, "--recompute"},
        {p->recompute_layers != 0, "--recompute-layers"},
        {a->recompute_modules != NULL, "--recompute-modules"},
        {p->cpu_offload_layers != 0, "--cpu-offload-layers"}, {a->zero_given, "--zero"},
        {a->dist_opt_given, "--dist-opt"}, {p->fsdp_shard != 0, "--fsdp-shard"},
        {p->dtype != d.dtype, "--dtype"}, {p->first_stage_layers != 0, "--first-stage-layers"},
        {p->last_stage_layers != 0, "--last-stage-layers"},
        {a->split_embedding, "--account-for-embedding-in-pipeline-split"},
        {a->split_loss, "--account-for-loss-in-pipeline-split"},
        {p->tp_comm_overlap, "--tp-comm-overlap"}, {a->no_grad_overlap, "--no-overlap-grad-reduce"},
        {a->no_p2p_overlap, "--no-overlap-p2p"}, {p->moe_a2a_overlap, "--moe-a2a-overlap"},
        {p->moe_hybridep, "--moe-hybridep"}, {p->grad_reduce_bf16, "--grad-reduce-bf16"},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (opts[i].set) return opts[i].name;
    return NULL;
}

/* The GPUs a launch line runs on: its own world size where the cluster can
 * host it (all GPUs, or the power-of-two tile of every NVLink domain, where
 * loom plan puts a GB200 NVL72 job and exports it from), else all of the
 * cluster's, and the import says what does not match. */
static int64_t launch_gpus(const char *arg, const loom_cluster *c)
{
    int64_t gpus = loom_cluster_gpus(c);
    loom_megatron_launch *l = malloc(sizeof *l);
    loom_error e;
    loom_cluster view;
    if (l && loom_megatron_read(arg, 0, l, &e) == LOOM_OK && l->world_from_line &&
        loom_cluster_job_view(c, l->world_size, &view))
        gpus = l->world_size;
    free(l);
    return gpus;
}

/* Parses argv into a; returns LOOM_CLI_RUN on success, else the exit code. */
static int parse(int argc, char **argv, eval_args *a)
{
    int rc = loom_cli_parse(&loom_cli_spec_eval, argc, argv, a);
    if (rc != LOOM_CLI_RUN) return rc;
    if (!a->model && !a->from_megatron)
        return loom_cli_usage_error("eval", "missing MODEL (a path or a bundled name)");
    if (!a->cluster) return loom_cli_usage_error("eval", "missing --cluster (a preset or a file)");
    if (a->from_megatron) {
        /* the launch line is the whole configuration: an option beside it
         * would be silently ignored */
        const char *opt = configuration_option(a);
        if (opt)
            return loom_cli_usage_error("eval", "%s: the configuration comes from --from-megatron's "
                                                "launch line; give Megatron's flag there instead", opt);
    }
    /* the defaults loom plan assumes too (cli.h) */
    if (!a->gbs_given && !a->from_megatron) a->p.gbs = LOOM_CLI_DEFAULT_GBS;
    if (!a->zero_given && !a->dist_opt_given && !a->from_megatron) a->p.zero = LOOM_CLI_DEFAULT_ZERO;
    if (a->recompute_modules) {
        char bad[64];
        if (!loom_recompute_modules_parse(a->recompute_modules, &a->p.recompute_modules, bad,
                                          sizeof bad))
            return loom_cli_usage_error("eval",
                                        "--recompute-modules: unknown module \"%s\" (expected "
                                        "core_attn, layernorm, moe_act, mla_up_proj, mlp, moe, "
                                        "shared_experts)", bad);
        if (a->p.recompute == LOOM_RECOMPUTE_FULL ||
            (a->recompute_given && a->p.recompute == LOOM_RECOMPUTE_NONE))
            return loom_cli_usage_error("eval", "--recompute-modules is Megatron's selective "
                                                "recompute; it cannot go with --recompute %s",
                                        a->p.recompute == LOOM_RECOMPUTE_FULL ? "full" : "none");
        if (a->p.framework == LOOM_FRAMEWORK_TORCHTITAN)
            return loom_cli_usage_error("eval", "--recompute-modules is Megatron's; torchtitan's "
                                                "--recompute selective is its op-level policy");
        a->p.recompute = LOOM_RECOMPUTE_SELECTIVE;
    }
    a->p.flash = !a->unfused;
    a->p.overlap_grad_reduce = !a->no_grad_overlap;
    a->p.overlap_p2p = !a->no_p2p_overlap;
    return LOOM_CLI_RUN;
}

/* ---- output ------------------------------------------------------------------ */

/* What was assumed rather than given: the defaults loom plan shares (cli.h). */
static void print_assumed(const eval_args *a)
{
    char buf[256] = "";
    size_t n = 0;
    if (!a->seq_given)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%sseq %lld", n ? ", " : "",
                              (long long)a->p.seq);
    if (!a->gbs_given)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%sgbs %lld", n ? ", " : "",
                              (long long)a->p.gbs);
    if (!a->zero_given && !a->dist_opt_given)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%sZeRO-%d", n ? ", " : "", a->p.zero);
    if (!a->attn_given && !a->unfused && a->p.framework != LOOM_FRAMEWORK_MEGATRON)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%sFlashAttention-2 (SDPA)", n ? ", " : "");
    if (!a->elementwise_given && a->p.framework == LOOM_FRAMEWORK_TORCHTITAN)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%seager element-wise ops (no torch.compile)",
                              n ? ", " : "");
    if (n)
        printf("assumed: %s (loom's defaults, the same for loom plan and loom eval; "
               "--seq, --gbs, --zero to change)\n", buf);
}

/* Megatron-Core's split with --account-for-embedding/loss-in-pipeline-split:
 * U = L + e + l units over pp · vpp chunks, U / (pp · vpp) each, the
 * embedding's unit on chunk 0 and the loss's on the last. */
static loom_status even_chunks_with_units(const eval_args *a, int64_t L, int32_t *layout,
                                          int32_t *n_chunks, loom_error *err)
{
    int64_t e = a->split_embedding, l = a->split_loss;
    int64_t vpp = a->p.vpp > 0 ? a->p.vpp : 1, n = a->p.pp * vpp;
    if (a->p.first_stage_layers || a->p.last_stage_layers)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "--account-for-embedding/loss-in-pipeline-split together with "
                              "--first/last-stage-layers: give one or the other");
    if (n > LOOM_EXPORT_MAX_CHUNKS)
        return loom_error_set(err, LOOM_ERR_INVALID, "%lld pipeline chunks: at most %d",
                              (long long)n, LOOM_EXPORT_MAX_CHUNKS);
    if (!loom_parallel_units_split(L, e, l, n, layout))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "%lld layers + %lld (embedding/loss) do not split evenly into --pp "
                              "%lld x --vpp %lld = %lld model chunks",
                              (long long)L, (long long)(e + l), (long long)a->p.pp,
                              (long long)vpp, (long long)n);
    *n_chunks = (int32_t)n;
    return LOOM_OK;
}

static double gib(int64_t b) { return (double)b / (double)((int64_t)1 << 30); }

/* --ops: the bottleneck stage's compute and exposed communication by kind
 * of work, per step; the rows add up to compute + tensor-parallel comm
 * (+ CPU offload copies) of the breakdown above. */
static void print_work(const loom_eval_result *r)
{
    const loom_step_breakdown *b = &r->breakdown;
    double all = b->compute_s + b->tp_comm_s + b->offload_s;
    printf("\nby kind of work (bottleneck stage, s per step)\n");
    printf("  %-30s %9s %9s %9s %9s %6s\n", "", "forward", "backward", "recomp", "total", "share");
    for (int k = 0; k < LOOM_WORK_COUNT; k++) {
        const loom_eval_work_time *w = &r->work[k];
        double t = w->fwd_s + w->bwd_s + w->rerun_s;
        if (t == 0) continue;
        printf("  %-30s %9.4f %9.4f %9.4f %9.4f %5.1f%%\n", loom_eval_work_label((loom_eval_work)k),
               w->fwd_s, w->bwd_s, w->rerun_s, t, all > 0 ? 100 * t / all : 0);
    }
    printf("  %-30s %39.4f\n", "compute + exposed comm", all);
}

static void print_text(const eval_args *a, const loom_cluster *c, const loom_graph *g,
                       const loom_eval_result *r)
{
    const loom_parallel *p = &a->p;
    const loom_step_breakdown *b = &r->breakdown;
    char zero[128];
    int zn;
    if (p->dist_opt) zn = snprintf(zero, sizeof zero, "distributed optimizer");
    else if (p->zero) zn = snprintf(zero, sizeof zero, "ZeRO-%d", p->zero);
    else zn = snprintf(zero, sizeof zero, "no ZeRO");
    if (p->fsdp_shard > 0 && p->fsdp_shard < p->dp && zn > 0 && (size_t)zn < sizeof zero)
        snprintf(zero + zn, sizeof zero - (size_t)zn, " (HSDP: shards of %lld, %lld replicas)",
                 (long long)p->fsdp_shard, (long long)(p->dp / p->fsdp_shard));
    printf("%s on %s (%lld × %s)\n", loom_graph_name(g), c->name, (long long)r->gpus, c->gpu.name);
    if (r->idle_gpus > 0)
        printf("runs on the first %lld GPUs of each %lld-GPU NVLink domain (its power-of-two tile: "
               "TP and EP groups up to %lld on NVLink); %lld GPUs idle\n",
               (long long)(r->gpus / c->nodes), (long long)c->gpus_per_node,
               (long long)(r->gpus / c->nodes), (long long)r->idle_gpus);
    char rc[128] = "", offload[96] = "";
    if (p->cpu_offload_layers > 0)
        snprintf(offload, sizeof offload, ", activations of %lld blocks offloaded to the CPU",
                 (long long)p->cpu_offload_layers);
    if (p->recompute_modules && p->recompute == LOOM_RECOMPUTE_SELECTIVE) {
        char list[96];
        loom_recompute_modules_format(p->recompute_modules, list, sizeof list);
        snprintf(rc, sizeof rc, " (%s)", list);
    }
    printf("config: tp %lld × pp %lld × dp %lld (cp %lld, ep %lld); mbs %lld, gbs %lld → %lld "
           "micro-batches; seq %lld, %s%s, recompute %s%s, vpp %lld, %s%s%s%s%s\n",
           (long long)p->tp, (long long)p->pp, (long long)p->dp, (long long)p->cp, (long long)p->ep,
           (long long)p->mbs, (long long)p->gbs, (long long)r->microbatches, (long long)p->seq,
           loom_dtype_name(p->dtype), p->sp ? ", SP" : "", loom_recompute_name(p->recompute), rc,
           (long long)p->vpp, zero, p->vpp > 1 && !p->overlap_p2p ? ", blocking p2p" : "",
           p->moe_a2a_overlap ? ", EP a2a overlap" : "", p->moe_hybridep ? ", HybridEP" : "",
           offload);
    printf("\nstep time            %10.4f s\n", r->step_time_s);
    const struct { const char *name; double s; } parts[] = {
        {"compute", b->compute_s},     {"tensor-parallel comm", b->tp_comm_s},
        {"pipeline bubble", b->bubble_s}, {"p2p", b->p2p_s},
        {"gradient sync", b->grad_sync_s}, {"optimizer", b->optimizer_s},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        printf("  %-20s %10.4f s  %5.1f%%\n", parts[i].name, parts[i].s,
               100 * parts[i].s / r->step_time_s);
    if (p->cpu_offload_layers > 0)   /* a row only where it can be non-zero */
        printf("  %-20s %10.4f s  %5.1f%%\n", "CPU offload copies", b->offload_s,
               100 * b->offload_s / r->step_time_s);
    printf("tokens/s             %12.0f\n", r->tokens_per_s);
    printf("model TFLOP/s/GPU    %10.1f   (full attention; causal: %.1f)\n",
           r->model_tflops_per_gpu, r->model_tflops_per_gpu * r->model_flops_causal / r->model_flops);
    printf("hardware TFLOP/s/GPU %10.1f   (with recompute)\n", r->hardware_tflops_per_gpu);
    printf("MFU                  %9.1f%%   (HFU %.1f%%, peak %.1f TFLOP/s %s)\n", 100 * r->mfu,
           100 * r->hfu, r->peak_flops / 1e12, loom_dtype_name(p->dtype));
    if (r->measured_fraction > 0)
        printf("measured op times    %9.1f%% of compute from the profile db\n",
               100 * r->measured_fraction);
    if (a->ops) print_work(r);
    printf("\nmemory per GPU (GiB; %s has %.1f)\n", c->gpu.name, gib(r->memory_capacity_bytes));
    printf("%5s %9s %8s %8s %8s %8s %8s %8s %8s  %s\n", "stage", "layers", "params", "grads",
           "optim", "activ", "other", "total", "in-flt", "fits");
    for (int64_t i = 0; i < r->n_stages; i++) {
        const loom_eval_stage *s = &r->stages[i];
        char layers[32];
        snprintf(layers, sizeof layers, "%d-%d%s", s->first_layer, s->last_layer,
                 p->vpp > 1 ? "*" : "");
        printf("%5lld %9s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  %s\n", (long long)i, layers,
               gib(s->mem.params_bytes), gib(s->mem.grads_bytes), gib(s->mem.optimizer_bytes),
               gib(s->mem.activations_bytes), gib(s->mem.other_bytes), gib(s->mem.total_bytes),
               s->mem.inflight, s->fits ? "yes" : "NO");
    }
    if (p->vpp > 1)
        printf("* interleaved: %lld model chunks spread over the layer range\n", (long long)p->vpp);
    if (p->cpu_offload_layers > 0 && r->n_stages > 0)
        printf("activations of the first %lld blocks in host memory: %.2f GiB per GPU (not in "
               "the table)\n", (long long)p->cpu_offload_layers,
               gib(r->stages[0].mem.offloaded_bytes));
    printf("\n%s\n", r->fits ? "fits in memory"
                             : "does NOT fit: a stage needs more memory than the GPU has usable (HBM less the memory headroom)");
}

static cJSON *breakdown_json(const loom_step_breakdown *b)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "compute_s", b->compute_s);
    cJSON_AddNumberToObject(o, "tp_comm_s", b->tp_comm_s);
    cJSON_AddNumberToObject(o, "offload_s", b->offload_s);
    cJSON_AddNumberToObject(o, "bubble_s", b->bubble_s);
    cJSON_AddNumberToObject(o, "p2p_s", b->p2p_s);
    cJSON_AddNumberToObject(o, "grad_sync_s", b->grad_sync_s);
    cJSON_AddNumberToObject(o, "optimizer_s", b->optimizer_s);
    return o;
}

static int print_json(const eval_args *a, const loom_cluster *c, const loom_graph *g,
                      const loom_eval_result *r)
{
    const loom_parallel *p = &a->p;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", loom_graph_name(g));
    cJSON_AddStringToObject(o, "cluster", c->name);
    cJSON_AddStringToObject(o, "gpu", c->gpu.name);
    cJSON_AddNumberToObject(o, "gpus", (double)r->gpus);
    if (r->idle_gpus > 0) cJSON_AddNumberToObject(o, "idle_gpus", (double)r->idle_gpus);
    cJSON *cfg = cJSON_AddObjectToObject(o, "config");
    const struct { const char *k; int64_t v; } ints[] = {
        {"tp", p->tp},   {"pp", p->pp},   {"dp", p->dp},   {"cp", p->cp},       {"ep", p->ep},
        {"vpp", p->vpp}, {"mbs", p->mbs}, {"gbs", p->gbs}, {"seq", p->seq},     {"zero", p->zero},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        cJSON_AddNumberToObject(cfg, ints[i].k, (double)ints[i].v);
    cJSON_AddBoolToObject(cfg, "sp", p->sp);
    cJSON_AddStringToObject(cfg, "recompute", loom_recompute_name(p->recompute));
    if (p->cpu_offload_layers > 0)
        cJSON_AddNumberToObject(cfg, "cpu_offload_layers", (double)p->cpu_offload_layers);
    if (p->recompute == LOOM_RECOMPUTE_SELECTIVE) {
        char list[96];
        loom_recompute_modules_format(loom_recompute_selected(p), list, sizeof list);
        cJSON_AddStringToObject(cfg, "recompute_modules", list);
    }
    cJSON_AddBoolToObject(cfg, "dist_opt", p->dist_opt);
    if (p->fsdp_shard > 0 && p->fsdp_shard < p->dp)   /* hybrid sharding only */
        cJSON_AddNumberToObject(cfg, "fsdp_shard", (double)p->fsdp_shard);
    cJSON_AddStringToObject(cfg, "framework", loom_framework_name(p->framework));
    cJSON_AddStringToObject(cfg, "elementwise",
                            a->elementwise == LOOM_ELEMENTWISE_EAGER ? "eager" : "fused");
    cJSON_AddStringToObject(cfg, "dtype", loom_dtype_name(p->dtype));
    cJSON_AddBoolToObject(cfg, "flash_attention", p->flash);
    cJSON_AddBoolToObject(cfg, "p2p_overlapped",
                          loom_pipeline_overlaps_p2p(p->vpp, p->framework == LOOM_FRAMEWORK_MEGATRON &&
                                                                 p->overlap_p2p));
    cJSON_AddBoolToObject(cfg, "moe_a2a_overlap", p->moe_a2a_overlap);
    if (p->moe_hybridep) cJSON_AddBoolToObject(cfg, "moe_hybridep", true);
    /* the inputs loom's shared defaults chose, as the text's "assumed:" line */
    cJSON *as = cJSON_AddArrayToObject(o, "assumed");
    if (!a->from_megatron) {
        if (!a->seq_given) cJSON_AddItemToArray(as, cJSON_CreateString("seq"));
        if (!a->gbs_given) cJSON_AddItemToArray(as, cJSON_CreateString("gbs"));
        if (!a->zero_given && !a->dist_opt_given) cJSON_AddItemToArray(as, cJSON_CreateString("zero"));
        if (!a->attn_given && !a->unfused && p->framework != LOOM_FRAMEWORK_MEGATRON)
            cJSON_AddItemToArray(as, cJSON_CreateString("attention_kernel"));
        if (!a->elementwise_given && p->framework == LOOM_FRAMEWORK_TORCHTITAN)
            cJSON_AddItemToArray(as, cJSON_CreateString("elementwise"));
    }
    cJSON_AddNumberToObject(o, "microbatches", (double)r->microbatches);
    cJSON_AddNumberToObject(o, "step_time_s", r->step_time_s);
    cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
    cJSON_AddNumberToObject(o, "model_tflops_per_gpu", r->model_tflops_per_gpu);
    cJSON_AddNumberToObject(o, "model_tflops_per_gpu_causal",
                            r->model_tflops_per_gpu * r->model_flops_causal / r->model_flops);
    cJSON_AddStringToObject(o, "model_flops_attention", "full");
    cJSON_AddNumberToObject(o, "hardware_tflops_per_gpu", r->hardware_tflops_per_gpu);
    cJSON_AddNumberToObject(o, "mfu", r->mfu);
    cJSON_AddNumberToObject(o, "hfu", r->hfu);
    cJSON_AddNumberToObject(o, "peak_tflops", r->peak_flops / 1e12);
    cJSON_AddNumberToObject(o, "memory_per_gpu_bytes", (double)r->memory_per_gpu_bytes);
    cJSON_AddNumberToObject(o, "memory_capacity_bytes", (double)r->memory_capacity_bytes);
    cJSON_AddBoolToObject(o, "fits", r->fits);
    cJSON_AddNumberToObject(o, "measured_fraction", r->measured_fraction);
    cJSON_AddItemToObject(o, "breakdown", breakdown_json(&r->breakdown));
    cJSON *work = cJSON_AddObjectToObject(o, "work");
    for (int k = 0; k < LOOM_WORK_COUNT; k++) {
        cJSON *w = cJSON_AddObjectToObject(work, loom_eval_work_key((loom_eval_work)k));
        cJSON_AddNumberToObject(w, "fwd_s", r->work[k].fwd_s);
        cJSON_AddNumberToObject(w, "bwd_s", r->work[k].bwd_s);
        cJSON_AddNumberToObject(w, "recompute_s", r->work[k].rerun_s);
    }
    cJSON *stages = cJSON_AddArrayToObject(o, "stages");
    for (int64_t i = 0; i < r->n_stages; i++) {
        const loom_eval_stage *s = &r->stages[i];
        cJSON *st = cJSON_CreateObject();
        cJSON_AddNumberToObject(st, "index", (double)i);
        int layers[2] = {s->first_layer, s->last_layer};
        cJSON_AddItemToObject(st, "layers", cJSON_CreateIntArray(layers, 2));
        cJSON_AddNumberToObject(st, "n_layers", s->n_layers);
        cJSON *m = cJSON_AddObjectToObject(st, "memory_bytes");
        cJSON_AddNumberToObject(m, "params", (double)s->mem.params_bytes);
        cJSON_AddNumberToObject(m, "grads", (double)s->mem.grads_bytes);
        cJSON_AddNumberToObject(m, "optimizer", (double)s->mem.optimizer_bytes);
        cJSON_AddNumberToObject(m, "activations", (double)s->mem.activations_bytes);
        cJSON_AddNumberToObject(m, "other", (double)s->mem.other_bytes);
        cJSON_AddNumberToObject(m, "total", (double)s->mem.total_bytes);
        if (s->mem.offloaded_bytes > 0)
            cJSON_AddNumberToObject(st, "offloaded_bytes", (double)s->mem.offloaded_bytes);
        cJSON_AddNumberToObject(st, "inflight_microbatches", s->mem.inflight);
        cJSON_AddBoolToObject(st, "fits", s->fits);
        cJSON *t = cJSON_AddObjectToObject(st, "time_s");
        cJSON_AddNumberToObject(t, "fwd", s->fwd_s);
        cJSON_AddNumberToObject(t, "bwd", s->bwd_s);
        cJSON_AddNumberToObject(t, "comm", s->comm_s);
        cJSON_AddNumberToObject(t, "grad_sync", s->grad_sync_s);
        cJSON_AddItemToArray(stages, st);
    }
    char *text = loom_json_print(o);
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "loom eval: out of memory\n");
        return LOOM_EXIT_FAIL;
    }
    fputs(text, stdout);
    free(text);
    return LOOM_EXIT_OK;
}

/* ---- the command ------------------------------------------------------------------ */

/* --mode serve, --from-vllm and --from-sglang belong to the serving
 * evaluator (cmd_eval_serve.c). */
static bool wants_serve(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *x = argv[i];
        if (!strcmp(x, "--mode=serve") || (!strcmp(x, "--mode") && i + 1 < argc &&
                                           !strcmp(argv[i + 1], "serve")))
            return true;
        if (!strncmp(x, "--from-vllm", 11) || !strncmp(x, "--from-sglang", 13)) return true;
    }
    return false;
}

int loom_cmd_eval(int argc, char **argv)
{
    if (wants_serve(argc, argv)) return loom_cmd_eval_serve(argc, argv);
    eval_args a;
    int rc = parse(argc, argv, &a);
    if (rc != LOOM_CLI_RUN) return rc;

    loom_error err = {0};
    loom_cluster cluster;
    char path[4096], cluster_path[4096];
    const char *cl = loom_cli_cluster_arg("loom eval", a.cluster, cluster_path, sizeof cluster_path);
    if (!cl) return LOOM_EXIT_FAIL;
    if (loom_cluster_load(cl, &cluster, &err)) return loom_cli_fail(&err);
    if (a.memory_headroom >= 0) cluster.memory_headroom = a.memory_headroom;
    if (!a.dp_given) {
        int64_t rest = a.p.tp * a.p.pp * a.p.cp, gpus = loom_cluster_gpus(&cluster);
        if (gpus % rest != 0)
            return loom_cli_usage_error("eval", "tp %lld × pp %lld × cp %lld = %lld does not divide "
                                        "the %lld GPUs of %s; give --dp",
                                        (long long)a.p.tp, (long long)a.p.pp, (long long)a.p.cp,
                                        (long long)rest, (long long)gpus, cluster.name);
        a.p.dp = gpus / rest;
    }
    loom_calib cal;
    if (a.calib && loom_calib_load(a.calib, &cal, &err)) return loom_cli_fail(&err);

    if (a.model && !loom_cli_find_data(a.model, "models", path, sizeof path)) {
        return loom_cli_no_model("loom", a.model);
    }
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = a.seq_given ? a.p.seq : loom_cli_default_seq(a.model ? path : NULL);
    mo.batch = a.p.mbs;
    mo.dtype = a.p.dtype;
    mo.flash_attention = a.p.flash;
    /* Megatron-LM trains the model's MTP layers (--mtp-num-layers);
     * torchtitan's DeepSeek-V3 recipes and DeepSpeed build none */
    mo.mtp = a.p.framework == LOOM_FRAMEWORK_MEGATRON;
    loom_graph *g = NULL;
    loom_cost_model *cm = NULL;
    loom_eval_result r;
    memset(&r, 0, sizeof r);
    int32_t layout[LOOM_EXPORT_MAX_CHUNKS];
    loom_eval_opts eo = {.chunk_layers = layout};
    if (a.from_megatron) {   /* the configuration (without MODEL also the model) from a launch line */
        loom_export_list notes = {0};
        if (!loom_megatron_eval_setup(a.from_megatron, a.model ? path : NULL,
                                      launch_gpus(a.from_megatron, &cluster), &a.p, layout,
                                      &eo.n_chunks, &g, &notes, &err))
            for (int i = 0; i < notes.n; i++) fprintf(stderr, "loom eval: note: %s\n", notes.item[i]);
    } else if (loom_model_load(path, &mo, &g, &err) == LOOM_OK) {
        /* the model's default sequence; a loom graph file fixes its own
         * batch and sequence */
        const loom_model_info *mi = loom_graph_info_c(g);
        if (!a.seq_given && mi->seq > 0) a.p.seq = mi->seq;
        if (!a.mbs_given && mi->batch > 0) a.p.mbs = mi->batch;
        if ((a.split_embedding || a.split_loss) &&
            even_chunks_with_units(&a, mi->layers, layout, &eo.n_chunks, &err)) {
            loom_graph_destroy(g);
            g = NULL;
        }
    }
    /* Megatron-LM and NeMo run Transformer Engine's fused attention; the
     * PyTorch-native stacks run SDPA's FlashAttention-2 unless told. */
    if (!a.attn_given) a.attn = a.p.framework == LOOM_FRAMEWORK_MEGATRON ? LOOM_ATTN_FUSED : LOOM_ATTN_FA2;
    /* torchtitan trains eagerly unless its config turns torch.compile on
     * (training.compile, later compile.enable: default false); Megatron-LM
     * and DeepSpeed's Megatron models run fused norm, RoPE and SwiGLU
     * kernels. */
    if (!a.elementwise_given)
        a.elementwise = a.p.framework == LOOM_FRAMEWORK_TORCHTITAN ? LOOM_ELEMENTWISE_EAGER
                                                                   : LOOM_ELEMENTWISE_FUSED;
    if (g && loom_cost_model_create(&cluster, a.calib ? &cal : NULL, a.profile, &cm, &err) == LOOM_OK) {
        loom_cost_model_set_attention(cm, (loom_attn_kernel)a.attn);
        loom_cost_model_set_elementwise(cm, (loom_elementwise_mode)a.elementwise);
    }
    if (!g || !cm || loom_eval_megatron_ex(g, cm, &a.p, &eo, &r, &err)) {
        rc = loom_cli_fail(&err);
    } else {
        rc = LOOM_EXIT_OK;
        loom_cli_warn_inputs("eval", loom_cluster_is_preset_name(cl) ? NULL : cl, &cluster,
                             loom_graph_info_c(g)->max_positions, a.p.gbs, a.p.seq, false);
        if (a.json) rc = print_json(&a, &cluster, g, &r);
        else {
            if (!a.from_megatron) print_assumed(&a);
            print_text(&a, &cluster, g, &r);
        }
    }
    loom_eval_result_free(&r);
    loom_cost_model_destroy(cm);
    loom_graph_destroy(g);
    return rc;
}
