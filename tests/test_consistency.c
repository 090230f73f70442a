/*
 * test_consistency.c — loom's two predictions of one Megatron-style
 * configuration agree: `loom eval` (loom_eval_megatron, costs/eval.c: the
 * analytic model calibrated against published runs) and the planner's
 * evaluator (loom_search_eval, solver/stage_eval.c: per-layer ILP solves
 * in Megatron's strategy space, solver/intra.h), on the configuration
 * Megatron-LM runs for the point (loom_mspace_config, planner/compare/mspace.h).
 *
 * Both rest on the same primitives (loom_cost_op_time, the α-β
 * collectives, costs/memory.h's model state, loom_pipeline_step), but each
 * derives which ops run on which shard and which collectives a layer pays
 * on its own: eval from Megatron's rules by dim name, the ILP from its
 * chosen specs. Agreement therefore checks that the ILP's Megatron space is
 * what Megatron runs (every linear layer tensor-parallel, the embedding
 * vocab-parallel, experts split by their hidden, the router on
 * sequence-parallel tokens) and that both charge the same physics:
 *   - the backward reductions of a column-parallel input run beside the
 *     wgrad GEMM, and with sequence parallelism the saved input is the
 *     1/tp shard, gathered again beside the dgrad GEMM;
 *   - full recompute reruns each layer's forward with its collectives;
 *   - ZeRO-3 gathers weights and scatters gradients every micro-batch;
 *   - an interleaved pipeline rank holds all its chunks;
 *   - the pipeline's p2p paces at its slowest boundary.
 *   - the data-parallel sync is loom_dp_sync_time_s in both (ZeRO-3 per
 *     block, Megatron's buckets);
 *   - a weight two layers read (a tied embedding: GPT-2, Llama-3.2-1B)
 *     is held and synchronised once by a stage holding both
 *     (loom_memory_weight_first_use, one rule for both);
 *   - context parallelism: every op on its rank's sequence chunk, ring
 *     attention (loom_ring_attention_exposed_s), and ONE data-parallel
 *     group of dp × cp ranks for the gradient sync and ZeRO's shards;
 *   - TP communication overlap: each tensor-parallel collective beside the
 *     GEMM it feeds or drains, only the excess exposed.
 * Tolerances: 0.2 % in step time and in memory per GPU (issue 19: the two
 * paths are one model; what is left is the ILP's per-layer resharding
 * placement, at most 0.19 % on these cases).
 *
 * Sequence parallelism is not a switch of the planner's configuration: in
 * Megatron's space the ILP chooses it per tensor, and it always does for
 * tp > 1 because it dominates (the same collective volume, reduce-scatter +
 * all-gather for each all-reduce, with 1/tp of the norm, dropout and
 * residual work and activations). For a configuration without SP the
 * planner therefore reports the SP variant: it equals eval with SP and is
 * never slower or larger than eval without it (checked below).
 *
 * Clusters: DGX H100 boxes, and GB200 NVL72 racks with configurations on
 * the 64-GPU tile of each rack (TP 16 and 32 inside the NVLink domain).
 *
 * Models: llama-3-8b, llama-3-70b, gpt3-175b (vocabulary 50257, padded
 * over TP as Megatron does), mixtral-8x7b (MoE), gpt2 and Llama-3.2-1B
 * (tests/data/llama-3.2-1b.json, its published HF config; tied embeddings). Units: seconds, bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "costs/cluster.h"
#include "costs/eval.h"
#include "planner/compare/mspace.h"
#include "planner/compare/algo.h"

typedef struct {
    const char *model, *cluster;
    int64_t seq, gbs;
    int64_t tp, pp, dp, mbs, vpp;
    bool recompute;
    int zero;
    bool sp, unfused;
    int64_t cp;      /* context parallel (0: 1) */
    bool overlap;    /* TP communication overlap (needs sp) */
    int64_t ep;      /* expert parallel (0: 1); above cp it spans ep / cp replicas */
    int64_t first_layers, last_layers;   /* uneven first/last stages (0: even) */
    int64_t etp;     /* expert TP (0: tp); 1 under a TP: the experts over the TP ranks */
} cfg_case;

typedef struct {
    double eval_step_s, plan_step_s;
    int64_t eval_mem, plan_mem;
} both;

#define STEP_TOL 0.002
#define MEM_TOL 0.002

/* Evaluates case k both ways (with full recompute of the first rc_layers
 * blocks of each pipeline rank only, when > 0; with selective recompute
 * instead of none when `selective`); false when either side fails to. */
static bool evaluate_rc(const cfg_case *k, int64_t rc_layers, bool selective, both *out)
{
    loom_cluster c;
    loom_error err = {0};
    loom_cost_model *cm = NULL;
    loom_algo_ctx *ctx = NULL;
    loom_model_source *src = NULL;
    loom_search *s = NULL;
    loom_eval_result e = {0};
    loom_search_eval_result q = {0};
    bool ok = false;
    char path[256];
    if (strchr(k->model, '/')) snprintf(path, sizeof path, "%s", k->model);
    else snprintf(path, sizeof path, "examples/models/%s.json", k->model);
    if (loom_cluster_preset(k->cluster, &c, &err) ||
        loom_cost_model_create(&c, NULL, NULL, &cm, &err))
        goto done;

    loom_algo_request r;
    loom_algo_request_init(&r);
    if (loom_model_open(path, &src, &err)) goto done;
    r.problem.model = src;
    r.problem.cm = cm;
    r.problem.gbs = k->gbs;
    r.problem.seq = k->seq;
    r.problem.flash_attention = !k->unfused;
    if (loom_algo_ctx_create(&r, &ctx, &err)) goto done;

    loom_parallel p;
    loom_parallel_init(&p);
    p.tp = k->tp, p.pp = k->pp, p.dp = k->dp, p.mbs = k->mbs, p.vpp = k->vpp;
    p.gbs = k->gbs, p.seq = k->seq, p.zero = k->zero, p.sp = k->sp && k->tp > 1;
    p.cp = k->cp > 1 ? k->cp : 1;
    p.tp_comm_overlap = k->overlap && p.sp;
    p.ep = k->ep > 1 ? k->ep : 1;
    p.etp = k->etp;
    p.first_stage_layers = k->first_layers, p.last_stage_layers = k->last_layers;
    p.flash = !k->unfused;
    p.recompute = k->recompute ? LOOM_RECOMPUTE_FULL : LOOM_RECOMPUTE_NONE;
    p.recompute_layers = k->recompute ? rc_layers : 0;
    if (selective && !k->recompute) p.recompute = LOOM_RECOMPUTE_SELECTIVE;
    loom_search_config cfg;
    loom_mspace_config(ctx, &p, &cfg);

    /* the planner's evaluator with the configuration's ZeRO stage */
    loom_search_options so;
    loom_algo_search_options(&r, &so);
    so.zero = k->zero;
    const loom_graph *g;
    if (loom_search_create(&r.problem, &so, &s, &err) || loom_search_graph(s, k->mbs, &g, &err)) goto done;
    if (loom_eval_megatron(g, cm, &p, &e, &err) || loom_search_eval(s, g, &cfg, &q, &err)) goto done;
    *out = (both){e.step_time_s, q.step_s, e.memory_per_gpu_bytes, q.memory_per_gpu_bytes};
    ok = true;
done:
    if (!ok) fprintf(stderr, "%s on %s: %s\n", k->model, k->cluster, err.msg);
    loom_eval_result_free(&e);
    loom_search_eval_free(&q);
    loom_search_destroy(s);
    loom_algo_ctx_destroy(ctx);
    loom_model_source_destroy(src);
    loom_cost_model_destroy(cm);
    return ok;
}

static bool evaluate(const cfg_case *k, int64_t rc_layers, both *out)
{
    return evaluate_rc(k, rc_layers, false, out);
}

static void label(const cfg_case *k, char *buf, size_t n)
{
    char cp[48] = "";
    if (k->cp > 1) snprintf(cp, sizeof cp, " cp%lld", (long long)k->cp);
    if (k->ep > 1) snprintf(cp + strlen(cp), sizeof cp - strlen(cp), " ep%lld", (long long)k->ep);
    if (k->etp > 0) snprintf(cp + strlen(cp), sizeof cp - strlen(cp), " etp%lld", (long long)k->etp);
    snprintf(buf, n, "%s tp%lld%s pp%lld dp%lld mbs%lld v%lld%s%s%s z%d%s", k->model,
             (long long)k->tp, cp, (long long)k->pp, (long long)k->dp, (long long)k->mbs,
             (long long)k->vpp, k->recompute ? " rc" : "", k->sp && k->tp > 1 ? " sp" : "",
             k->overlap && k->sp && k->tp > 1 ? " ov" : "", k->zero, k->unfused ? " unfused" : "");
}

static double rel(double a, double b)
{
    return b != 0 ? a / b - 1 : 0;
}

#define L8 "llama-3-8b"
#define L70 "llama-3-70b"
#define G175 "gpt3-175b"
#define MX "mixtral-8x7b"
#define GPT2 "gpt2"
#define L1B "tests/data/llama-3.2-1b.json"

/* Megatron-expressible configurations: TP (with SP and TP communication
 * overlap), CP, PP, interleaving, DP with ZeRO 0-3, full recompute, fused
 * and unfused attention. */
static const cfg_case cases[] = {
    {L8, "dgx-h100-x1", 4096, 64, 1, 1, 8, 1, 1, false, 0, false, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 1, 1, 8, 1, 1, false, 1, false, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 1, 1, 8, 1, 1, false, 2, false, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 1, 1, 8, 1, 1, false, 3, false, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 1, 1, 8, 1, 1, true, 1, false, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 2, 1, 4, 1, 1, false, 1, true, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 8, 1, 1, 1, 1, false, 0, true, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 8, 1, 1, 1, 1, true, 0, true, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 2, 4, 1, 1, 1, false, 0, true, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 1, 8, 1, 1, 1, false, 0, false, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 2, 2, 2, 1, 2, false, 1, true, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 4, 2, 1, 2, 1, true, 0, true, false, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 2048, 64, 8, 1, 1, 1, 1, false, 0, true, true, 0, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x2", 8192, 64, 4, 1, 4, 4, 1, true, 2, true, false, 0, false, 0, 0, 0, 0},
    {L70, "dgx-h100-x8", 4096, 256, 8, 4, 2, 1, 1, false, 1, true, false, 0, false, 0, 0, 0, 0},
    {L70, "dgx-h100-x8", 4096, 256, 8, 4, 2, 1, 2, false, 1, true, false, 0, false, 0, 0, 0, 0},
    {L70, "dgx-h100-x8", 4096, 256, 8, 2, 4, 1, 1, true, 1, true, false, 0, false, 0, 0, 0, 0},
    {L70, "dgx-h100-x8", 4096, 256, 8, 1, 8, 1, 1, true, 2, true, false, 0, false, 0, 0, 0, 0},
    {L70, "dgx-h100-x8", 4096, 256, 8, 1, 8, 1, 1, true, 3, true, false, 0, false, 0, 0, 0, 0},
    {L70, "dgx-h100-x4", 4096, 128, 4, 8, 1, 1, 1, false, 0, true, false, 0, false, 0, 0, 0, 0},
    {G175, "dgx-h100-x16", 2048, 256, 8, 8, 2, 1, 1, false, 1, true, false, 0, false, 0, 0, 0, 0},
    {G175, "dgx-h100-x16", 2048, 256, 8, 16, 1, 1, 1, true, 0, true, false, 0, false, 0, 0, 0, 0},
    {G175, "dgx-h100-x16", 2048, 256, 8, 4, 4, 1, 3, true, 1, true, false, 0, false, 0, 0, 0, 0},
    {G175, "dgx-h100-x16", 2048, 256, 8, 8, 2, 1, 1, false, 1, true, true, 0, false, 0, 0, 0, 0},
    {MX, "dgx-h100-x1", 4096, 64, 8, 1, 1, 1, 1, false, 0, true, false, 0, false, 0, 0, 0, 0},
    {MX, "dgx-h100-x2", 4096, 64, 8, 2, 1, 1, 1, true, 0, true, false, 0, false, 0, 0, 0, 0},
    {MX, "dgx-h100-x2", 4096, 64, 4, 4, 1, 1, 1, false, 0, true, false, 0, false, 0, 0, 0, 0},
    {MX, "dgx-h100-x2", 4096, 64, 2, 8, 1, 1, 1, true, 0, true, false, 0, false, 0, 0, 0, 0},
    {MX, "dgx-h100-x4", 4096, 128, 8, 2, 2, 1, 2, true, 1, true, false, 0, false, 0, 0, 0, 0},
    /* tied embeddings (GPT-2's wte, Llama-3.2-1B's embed_tokens are the
     * lm_head): one stage holds and syncs the table once */
    {GPT2, "dgx-h100-x1", 1024, 256, 1, 1, 8, 8, 1, false, 1, false, false, 0, false, 0, 0, 0, 0},
    {GPT2, "dgx-h100-x1", 1024, 256, 1, 1, 8, 1, 1, false, 0, false, false, 0, false, 0, 0, 0, 0},
    {GPT2, "dgx-h100-x1", 1024, 256, 2, 1, 4, 4, 1, true, 1, true, false, 0, false, 0, 0, 0, 0},
    {GPT2, "dgx-h100-x1", 1024, 256, 1, 2, 4, 2, 1, false, 1, false, false, 0, false, 0, 0, 0, 0},
    {L1B, "dgx-h100-x1", 4096, 256, 1, 1, 8, 1, 1, false, 1, false, false, 0, false, 0, 0, 0, 0},
    {L1B, "dgx-h100-x1", 4096, 256, 1, 1, 8, 2, 1, true, 3, false, false, 0, false, 0, 0, 0, 0},
    {L1B, "dgx-h100-x1", 4096, 256, 2, 2, 2, 1, 2, false, 1, true, false, 0, false, 0, 0, 0, 0},
    {L1B, "dgx-h100-x2", 8192, 64, 4, 2, 2, 1, 1, true, 1, true, false, 0, false, 0, 0, 0, 0},
    /* context parallelism (ring attention; the data-parallel group spans
     * dp x cp) and TP communication overlap (issue 19) */
    {L8, "dgx-h100-x1", 8192, 64, 2, 1, 2, 1, 1, false, 1, true, false, 2, false, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 8192, 64, 2, 1, 2, 1, 1, false, 1, true, false, 2, true, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 4096, 64, 4, 1, 2, 2, 1, true, 1, true, false, 0, true, 0, 0, 0, 0},
    {L8, "dgx-h100-x2", 8192, 64, 2, 1, 2, 1, 1, false, 1, true, false, 4, true, 0, 0, 0, 0},
    {L8, "dgx-h100-x1", 8192, 64, 1, 1, 1, 1, 1, false, 3, false, false, 8, false, 0, 0, 0, 0},
    {L70, "dgx-h100-x8", 8192, 128, 4, 4, 2, 1, 2, false, 1, true, false, 2, true, 0, 0, 0, 0},
    {L70, "dgx-h100-x16", 4096, 512, 4, 2, 2, 4, 4, false, 1, true, false, 8, true, 0, 0, 0, 0},
    {L70, "dgx-h100-x8", 4096, 256, 8, 4, 2, 1, 2, true, 1, true, false, 0, true, 0, 0, 0, 0},
    {G175, "dgx-h100-x16", 2048, 256, 8, 4, 2, 1, 1, true, 1, true, false, 2, true, 0, 0, 0, 0},
    {MX, "dgx-h100-x2", 4096, 64, 2, 2, 2, 1, 1, false, 1, true, false, 2, true, 0, 0, 0, 0},
    {GPT2, "dgx-h100-x1", 1024, 256, 2, 1, 4, 4, 1, false, 1, true, false, 0, true, 0, 0, 0, 0},
    {L1B, "dgx-h100-x1", 4096, 256, 2, 2, 1, 1, 1, false, 1, true, false, 2, true, 0, 0, 0, 0},
    /* the 64-GPU tile of each GB200 NVL72 rack (issue 21; costs/cluster.h):
     * TP 16 and 32 on NVLink inside it, the rack's other 8 GPUs idle; the
     * planner's evaluator on the tile view, eval on the same ranks */
    {G175, "gb200-nvl72-x1", 2048, 64, 16, 4, 1, 1, 1, false, 1, true, false, 0, true, 0, 0, 0, 0},
    {G175, "gb200-nvl72-x2", 2048, 128, 32, 2, 2, 1, 1, true, 1, true, false, 0, false, 0, 0, 0, 0},
    {G175, "gb200-nvl72-x1", 2048, 64, 16, 2, 2, 1, 2, false, 1, true, false, 0, true, 0, 0, 0, 0},
    {G175, "gb200-nvl72-x2", 2048, 64, 16, 1, 8, 1, 1, false, 1, true, false, 0, true, 0, 0, 0, 0},
    /* expert parallelism across data-parallel replicas (Megatron-Core's MoE
     * parallel folding: EP over cp x dp ranks; issue 19): the expert group
     * of ep / cp neighbouring replicas, its all-to-all, the experts' 1/ep
     * share and their data-parallel group of dp·cp / ep ranks */
    {MX, "dgx-h100-x2", 4096, 64, 2, 2, 2, 1, 1, false, 1, true, false, 2, true, 4, 0, 0, 0},
    {MX, "dgx-h100-x4", 4096, 64, 2, 2, 4, 1, 1, true, 1, true, false, 2, true, 8, 0, 0, 0},
    {MX, "dgx-h100-x4", 8192, 64, 1, 2, 4, 1, 1, false, 1, false, false, 4, false, 8, 0, 0, 0},
    /* DeepSeek-V3 on the tiles of four NVL72 racks, EP 16 over cp 2 x 8
     * replicas: the configuration of issue 19 that the Megatron space missed */
    {"deepseek-v3", "gb200-nvl72-x4", 4096, 256, 2, 4, 16, 1, 1, false, 1, true, false, 2, true,
     16, 14, 15, 0},
    /* expert TP 1 under TP 2 and 4 (MoE parallel folding, issue 19): the
     * experts split over the TP ranks instead of their hidden f, EP tp
     * (data parallel or CP on axis 0) or tp x cp, the dispatcher's
     * all-to-all over that group, no TP collective in the expert GEMMs */
    {MX, "dgx-h100-x2", 4096, 64, 2, 2, 4, 1, 1, false, 1, true, false, 0, true, 2, 0, 0, 1},
    {MX, "dgx-h100-x2", 4096, 64, 4, 2, 2, 1, 1, true, 1, true, false, 0, true, 4, 0, 0, 1},
    {MX, "dgx-h100-x2", 4096, 64, 2, 2, 2, 1, 1, false, 1, true, false, 2, true, 4, 0, 0, 1},
    {MX, "dgx-h100-x2", 4096, 64, 2, 2, 2, 1, 1, false, 1, true, false, 2, true, 2, 0, 0, 1},
    {"qwen3-30b-a3b", "dgx-h100-x4", 4096, 128, 4, 2, 2, 1, 2, false, 1, true, false, 2, true, 8,
     0, 0, 1},
    /* ... with the expert group spanning replicas too: EP tp x cp x 2 */
    {MX, "dgx-h100-x2", 4096, 64, 2, 2, 2, 1, 1, false, 1, true, false, 2, true, 8, 0, 0, 1},
    {"deepseek-v3", "dgx-h100-x8", 4096, 256, 2, 4, 4, 1, 1, false, 1, true, false, 2, true, 16,
     14, 15, 1},
};

static void test_agreement(void)
{
    double worst_step = 0, worst_mem = 0;
    printf("%-50s %10s %10s %7s %9s %9s %7s\n", "configuration", "eval s", "plan s", "step",
           "eval GiB", "plan GiB", "memory");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const cfg_case *k = &cases[i];
        both b;
        char name[128];
        label(k, name, sizeof name);
        bool ok = evaluate(k, 0, &b);
        CHECK(ok);
        if (!ok) continue;
        double ds = rel(b.plan_step_s, b.eval_step_s);
        double dm = rel((double)b.plan_mem, (double)b.eval_mem);
        printf("%-50s %10.4f %10.4f %+6.2f%% %9.2f %9.2f %+6.2f%%\n", name, b.eval_step_s,
               b.plan_step_s, 100 * ds, (double)b.eval_mem / 1073741824.0,
               (double)b.plan_mem / 1073741824.0, 100 * dm);
        if (fabs(dm) > MEM_TOL) fprintf(stderr, "disagree: %s\n", name);
        if (fabs(ds) > STEP_TOL) fprintf(stderr, "disagree: %s\n", name);
        CHECK_NEAR_REL(b.plan_step_s, b.eval_step_s, STEP_TOL);
        CHECK_NEAR_REL((double)b.plan_mem, (double)b.eval_mem, MEM_TOL);
        worst_step = fmax(worst_step, fabs(ds));
        worst_mem = fmax(worst_mem, fabs(dm));
    }
    printf("largest disagreement: step %.2f%%, memory %.2f%%\n", 100 * worst_step, 100 * worst_mem);
}

/* Without sequence parallelism: the planner's Megatron space takes SP (see
 * above), so its figure is eval's with SP, and no worse than eval's
 * without it in time or memory. */
static void test_without_sp(void)
{
    static const cfg_case no_sp[] = {
        {L8, "dgx-h100-x1", 4096, 64, 2, 1, 4, 1, 1, false, 1, false, false, 0, false, 0, 0, 0, 0},
        {L8, "dgx-h100-x1", 4096, 64, 8, 1, 1, 1, 1, true, 0, false, false, 0, false, 0, 0, 0, 0},
        {L70, "dgx-h100-x8", 4096, 256, 8, 8, 1, 1, 1, false, 0, false, false, 0, false, 0, 0, 0, 0},
        {G175, "dgx-h100-x16", 2048, 256, 8, 8, 2, 2, 1, true, 1, false, false, 0, false, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof no_sp / sizeof no_sp[0]; i++) {
        cfg_case with = no_sp[i];
        with.sp = true;
        both a, b;
        bool ok = evaluate(&no_sp[i], 0, &a) && evaluate(&with, 0, &b);
        CHECK(ok);
        if (!ok) continue;
        char name[128];
        label(&no_sp[i], name, sizeof name);
        printf("%-50s eval without SP %.4f s %.2f GiB, with SP %.4f s; plan %.4f s %.2f GiB\n",
               name, a.eval_step_s, (double)a.eval_mem / 1073741824.0, b.eval_step_s,
               a.plan_step_s, (double)a.plan_mem / 1073741824.0);
        CHECK(a.plan_step_s <= a.eval_step_s);
        CHECK(a.plan_mem <= a.eval_mem);
        CHECK(b.eval_step_s < a.eval_step_s);   /* SP dominates in eval too */
        CHECK_NEAR_REL(a.plan_step_s, b.eval_step_s, STEP_TOL);
        CHECK_NEAR_REL((double)a.plan_mem, (double)b.eval_mem, MEM_TOL);
    }
}

/* Partial recompute (Megatron's --recompute-method block
 * --recompute-num-layers N; loom eval --recompute-layers N): the first N
 * blocks of each pipeline chunk rerun, the rest keep their activations;
 * with interleaving N counts in each virtual chunk, as Megatron's block
 * method runs per TransformerBlock (megatron/core/recompute.py). Each N
 * lies strictly between none and full in time and memory. */
static void test_partial_recompute(void)
{
    static const struct {
        cfg_case k;
        int64_t n;
    } partial[] = {
        {{L70, "dgx-h100-x4", 4096, 128, 8, 4, 1, 1, 1, true, 0, true, false, 0, true, 0, 0, 0, 0}, 5},
        {{L70, "dgx-h100-x4", 4096, 128, 8, 4, 1, 1, 1, true, 0, true, false, 0, true, 0, 0, 0, 0}, 19},
        {{L8, "dgx-h100-x1", 4096, 64, 2, 4, 1, 1, 1, true, 0, true, false, 0, true, 0, 0, 0, 0}, 3},
        {{L8, "dgx-h100-x1", 4096, 64, 2, 2, 2, 1, 2, true, 1, true, false, 0, true, 0, 0, 0, 0}, 5},
        {{L70, "dgx-h100-x4", 4096, 128, 8, 4, 1, 1, 2, true, 0, true, false, 0, true, 0, 0, 0, 0}, 3},
        {{L70, "dgx-h100-x8", 4096, 256, 8, 4, 2, 1, 1, true, 1, true, false, 0, true, 0, 9, 9, 0}, 7},
        {{MX, "dgx-h100-x2", 4096, 64, 8, 2, 1, 1, 1, true, 0, true, false, 0, false, 0, 0, 0, 0}, 4},
    };
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++) {
        const cfg_case *k = &partial[i].k;
        cfg_case none = *k;
        none.recompute = false;
        both b, full, no;
        bool ok = evaluate(k, partial[i].n, &b) && evaluate(k, 0, &full) && evaluate(&none, 0, &no);
        CHECK(ok);
        if (!ok) continue;
        char name[128];
        label(k, name, sizeof name);
        printf("%-50s first %lld blocks: eval %.4f s %.2f GiB, plan %.4f s %.2f GiB "
               "(none %.4f s, full %.4f s)\n", name, (long long)partial[i].n, b.eval_step_s,
               (double)b.eval_mem / 1073741824.0, b.plan_step_s, (double)b.plan_mem / 1073741824.0,
               no.eval_step_s, full.eval_step_s);
        CHECK_NEAR_REL(b.plan_step_s, b.eval_step_s, STEP_TOL);
        CHECK_NEAR_REL((double)b.plan_mem, (double)b.eval_mem, MEM_TOL);
        CHECK(b.eval_step_s < full.eval_step_s && b.eval_step_s > no.eval_step_s);
        CHECK(b.eval_mem > full.eval_mem && b.eval_mem < no.eval_mem);
    }
}

/* Selective recompute (Korthikanti et al.; Megatron's --recompute-
 * granularity selective): with unfused attention the core's ops (their
 * s x t scores and probabilities) rerun and their tensors are not kept; with
 * fused attention there is nothing to rerun and it equals none. */
static void test_selective(void)
{
    static const cfg_case sel[] = {
        {L8, "dgx-h100-x1", 4096, 64, 2, 1, 4, 1, 1, false, 1, true, true, 0, false, 0, 0, 0, 0},
        {L8, "dgx-h100-x1", 2048, 64, 8, 1, 1, 2, 1, false, 0, true, true, 0, true, 0, 0, 0, 0},
        {L70, "dgx-h100-x8", 2048, 256, 8, 4, 2, 1, 2, false, 1, true, true, 0, true, 0, 0, 0, 0},
        {GPT2, "dgx-h100-x1", 1024, 256, 2, 2, 2, 2, 1, false, 1, true, true, 0, false, 0, 0, 0, 0},
        {L8, "dgx-h100-x1", 4096, 64, 2, 1, 4, 1, 1, false, 1, true, false, 0, false, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++) {
        const cfg_case *k = &sel[i];
        both b, no;
        bool ok = evaluate_rc(k, 0, true, &b) && evaluate(k, 0, &no);
        CHECK(ok);
        if (!ok) continue;
        char name[128];
        label(k, name, sizeof name);
        printf("%-50s selective: eval %.4f s %.2f GiB, plan %.4f s %.2f GiB (none %.4f s %.2f GiB)\n",
               name, b.eval_step_s, (double)b.eval_mem / 1073741824.0, b.plan_step_s,
               (double)b.plan_mem / 1073741824.0, no.eval_step_s, (double)no.eval_mem / 1073741824.0);
        CHECK_NEAR_REL(b.plan_step_s, b.eval_step_s, STEP_TOL);
        CHECK_NEAR_REL((double)b.plan_mem, (double)b.eval_mem, MEM_TOL);
        if (k->unfused) CHECK(b.eval_step_s > no.eval_step_s && b.eval_mem < no.eval_mem);
        /* fused attention: Megatron's core_attn checkpoint reruns the kernel
         * (costs/recompute.h) for no memory (it keeps q, k, v and o) */
        else CHECK(b.eval_step_s > no.eval_step_s && b.eval_mem == no.eval_mem);
    }
}

int main(void)
{
    test_agreement();
    test_without_sp();
    test_partial_recompute();
    test_selective();
    return check_done();
}
