/*
 * test_moe.c — the mixture-of-experts layer's costs (costs/moe.h) against
 * independent references:
 *   - E[max of n standard normals] against its tabulated values (1/√π,
 *     3/(2√π), and Harter's 1961 table for 5, 10, 100);
 *   - the busiest expert-parallel rank's load factor against a brute-force
 *     Monte Carlo of uniform top-k routing (each token draws k distinct
 *     experts; ranks own contiguous blocks of E/P experts);
 *   - the dispatch / combine kernels' bytes and the all-to-all volumes of a
 *     Qwen3-30B-A3B layer, computed by hand;
 *   - a tiny Mixtral-shaped model through the cost model and `loom eval`:
 *     the dispatch op's time is its hand-counted bytes at the memory
 *     roofline plus its launches, the router's gate stays bf16 under FP8,
 *     an FP8 input shared by gate and up is cast once, and eval's
 *     expert-parallel communication is the hand list of collectives.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "costs/collective.h"
#include "costs/compute.h"
#include "costs/eval.h"
#include "costs/moe.h"
#include "graph/model.h"

/* ---- copies across NVLink domains (hierarchical dispatch) ------------------- */

/* Brute force: every k-subset of E experts, equally likely (uniform top-k
 * routing), experts in contiguous blocks of E/P per rank and ranks in
 * domains of `per`; the sender sits in domain 0; count the other domains
 * its subset touches. */
static double copies_brute(int E, int k, int P, int per)
{
    int experts_per_domain = E / P * per;
    double sum = 0, subsets = 0;
    for (uint32_t m = 0; m < (1u << E); m++) {
        if (__builtin_popcount(m) != k) continue;
        uint32_t hit = 0;
        for (int x = 0; x < E; x++)
            if (m >> x & 1) hit |= 1u << (x / experts_per_domain);
        sum += __builtin_popcount(hit & ~1u);
        subsets += 1;
    }
    return sum / subsets;
}

static void test_remote_domain_copies(void)
{
    /* 16 experts over 8 ranks in domains of 2, 4 and 8 ranks, top 1-4 */
    for (int per = 2; per <= 8; per *= 2)
        for (int k = 1; k <= 4; k++)
            CHECK_NEAR_REL(loom_moe_remote_domain_copies(16, k, 8, per), copies_brute(16, k, 8, per),
                           1e-12);
    /* one domain: nothing crosses */
    CHECK(loom_moe_remote_domain_copies(16, 4, 8, 8) == 0);
    CHECK(loom_moe_remote_domain_copies(16, 4, 8, 16) == 0);
    /* Qwen3-30B-A3B on EP16 over two 8-GPU nodes: the other node holds
     * none of a token's 8 experts with probability 64·63·…·57 / (128·127·
     * …·121) = 0.0030959, so 0.99690 copies cross, where the flat
     * all-to-all sends 8 · 8/16 = 4 */
    double none = 1;
    for (int i = 0; i < 8; i++) none *= (64.0 - i) / (128.0 - i);
    CHECK_NEAR_REL(none, 0.0030959, 1e-4);
    CHECK_NEAR_REL(loom_moe_remote_domain_copies(128, 8, 16, 8), 1 - none, 1e-12);
}

/* ---- E[max] of normals --------------------------------------------------------- */

static void test_expected_max(void)
{
    const double pi = 3.14159265358979323846;
    CHECK(loom_moe_expected_max_normal(1) == 0);
    CHECK_NEAR_REL(loom_moe_expected_max_normal(2), 1 / sqrt(pi), 1e-7);
    CHECK_NEAR_REL(loom_moe_expected_max_normal(3), 1.5 / sqrt(pi), 1e-7);
    /* H. L. Harter, "Expected values of normal order statistics",
     * Biometrika 48 (1961), Table 1 */
    CHECK_NEAR_REL(loom_moe_expected_max_normal(5), 1.16296, 1e-5);
    CHECK_NEAR_REL(loom_moe_expected_max_normal(10), 1.53875, 1e-5);
    CHECK_NEAR_REL(loom_moe_expected_max_normal(100), 2.50759, 1e-5);
}

/* ---- load imbalance against Monte Carlo --------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)   /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Mean over `trials` of max_r load_r / (N·k/P): every token draws k
 * distinct experts by a partial Fisher-Yates shuffle. */
static double monte_carlo(int E, int k, int P, int N, int trials)
{
    int *perm = malloc((size_t)E * sizeof *perm), *load = malloc((size_t)P * sizeof *load);
    double sum = 0;
    rng_state = 12345;
    for (int t = 0; t < trials; t++) {
        for (int r = 0; r < P; r++) load[r] = 0;
        for (int e = 0; e < E; e++) perm[e] = e;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < k; j++) {
                int pick = j + (int)(rng_next() % (uint64_t)(E - j));
                int tmp = perm[j];
                perm[j] = perm[pick], perm[pick] = tmp;
                load[perm[j] / (E / P)]++;
            }
        int mx = 0;
        for (int r = 0; r < P; r++) mx = load[r] > mx ? load[r] : mx;
        sum += mx / ((double)N * k / P);
    }
    free(perm);
    free(load);
    return sum / trials;
}

static void test_load_factor(void)
{
    /* Monte Carlo standard error of the excess (factor - 1) is ~1% of it
     * with 2000 trials; the normal approximation is within 2% of the excess
     * here, down to 16 rows a rank. */
    static const struct { int E, k, P, N; double tol; } cases[] = {
        {16, 2, 4, 512, 0.05},    /* mean 256 rows per rank */
        {64, 6, 16, 256, 0.05},   /* 96 */
        {128, 8, 8, 1024, 0.05},  /* 1024: Qwen3-30B's routing, a small batch */
        {8, 2, 8, 64, 0.05},      /* 16 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double model = loom_moe_max_load_factor(cases[i].E, cases[i].k, cases[i].P, cases[i].N);
        double mc = monte_carlo(cases[i].E, cases[i].k, cases[i].P, cases[i].N, 2000);
        printf("E %d k %d P %d N %d: model %.4f, Monte Carlo %.4f\n", cases[i].E, cases[i].k,
               cases[i].P, cases[i].N, model, mc);
        CHECK_NEAR_REL(model - 1, mc - 1, cases[i].tol);
    }
    /* No imbalance with one rank, every expert taken, or no routing. */
    CHECK(loom_moe_max_load_factor(128, 8, 1, 4096) == 1);
    CHECK(loom_moe_max_load_factor(8, 8, 4, 4096) == 1);
    CHECK(loom_moe_max_load_factor(128, 8, 8, 0) == 1);
    CHECK(loom_moe_max_load_factor(100, 8, 8, 4096) == 1);   /* 8 does not divide 100 */
    /* More tokens, less imbalance: the excess falls as 1/sqrt(N). */
    double a = loom_moe_max_load_factor(128, 8, 8, 4096) - 1;
    double b = loom_moe_max_load_factor(128, 8, 8, 4 * 4096) - 1;
    CHECK_NEAR_REL(a / b, 2.0, 1e-9);
}

/* ---- bytes by hand ------------------------------------------------------------- */

static void test_bytes(void)
{
    /* Qwen3-30B-A3B on 8 GPUs, EP 8: a rank routes T = 4096 tokens of
     * h = 2048 bf16 (4096 B a row) to k = 8 of 128 experts, 16 per rank;
     * load factor 1 (an even split) to keep the numbers round.
     *   U = T·k·4096 = 134,217,728 B (the dispatched rows)
     *   X = T·4096   =  16,777,216 B (the token rows)
     *   P = T·k·4    =     131,072 B (an fp32 probability per row)
     * Dispatch, bf16: permute X + U + P, sort 2·(U + P):
     *   16,777,216 + 134,348,800 + 268,697,600 = 419,823,616 B
     *   kernels: row map + permute, sort map + sort = 4 forward; 2 backward
     * With FP8 padding add 2·(U + P) = 268,697,600 B -> 688,521,216 B. */
    loom_moe_side s = {.tokens = 4096, .row_bytes = 4096, .topk = 8, .local_experts = 16, .ep = 8,
                       .load_factor = 1, .fp8_padding = false};
    loom_moe_pass f, b;
    loom_moe_permute_passes(&s, true, &f, &b);
    CHECK_NEAR_REL(f.bytes, 419823616.0, 1e-15);
    CHECK_NEAR_REL(b.bytes, 419823616.0, 1e-15);
    CHECK_INT_EQ(f.kernels, 4);
    CHECK_INT_EQ(b.kernels, 2);
    s.fp8_padding = true;
    loom_moe_permute_passes(&s, true, &f, &b);
    CHECK_NEAR_REL(f.bytes, 688521216.0, 1e-15);
    CHECK_INT_EQ(f.kernels, 6);
    /* Combine, FP8: unpad 2U, unsort 2U, unpermute U + X:
     *   268,435,456 · 2 + 150,994,944 = 687,865,856 B, 3 kernels a pass. */
    loom_moe_permute_passes(&s, false, &f, &b);
    CHECK_NEAR_REL(f.bytes, 687865856.0, 1e-15);
    CHECK_NEAR_REL(b.bytes, 687865856.0, 1e-15);
    CHECK_INT_EQ(f.kernels, 3);
    /* One local expert (EP = E): no sort. A load factor of 1.25 scales
     * what the busiest rank received (sort, pad), not its own permute. */
    s.local_experts = 1, s.fp8_padding = false, s.load_factor = 1.25;
    loom_moe_permute_passes(&s, false, &f, &b);
    CHECK_NEAR_REL(f.bytes, 150994944.0, 1e-15);
    s.local_experts = 16;
    loom_moe_permute_passes(&s, false, &f, &b);
    CHECK_NEAR_REL(f.bytes, 150994944.0 + 2 * 1.25 * 134217728.0, 1e-15);

    /* Collectives of that layer (load 1): dispatch forward = all-gather of
     * 128 int64 counts from 8 ranks (8192 B), all-to-all of U and of P;
     * backward U and P again; combine U each way. */
    s.load_factor = 1;
    loom_moe_comm c[LOOM_MOE_MAX_COMM];
    int n = loom_moe_comm_ops(&s, true, 128, c);
    CHECK_INT_EQ(n, 5);
    CHECK_INT_EQ(c[0].kind, LOOM_COLL_ALL_GATHER);
    CHECK_NEAR_REL(c[0].bytes, 8192.0, 0);
    CHECK(!c[0].backward && !c[1].backward && !c[2].backward && c[3].backward && c[4].backward);
    CHECK_NEAR_REL(c[1].bytes, 134217728.0, 0);
    CHECK_NEAR_REL(c[2].bytes, 131072.0, 0);
    CHECK_NEAR_REL(c[3].bytes, 134217728.0, 0);
    n = loom_moe_comm_ops(&s, false, 128, c);
    CHECK_INT_EQ(n, 2);
    CHECK(c[0].kind == LOOM_COLL_ALL_TO_ALL && !c[0].backward && c[1].backward);
    CHECK_NEAR_REL(c[0].bytes, 134217728.0, 0);
    s.ep = 1;   /* no expert parallelism: nothing to exchange */
    CHECK_INT_EQ(loom_moe_comm_ops(&s, true, 128, c), 0);

    /* Router: 4096 tokens × 128 experts = 524,288 scores; top-k alone
     * 7 B forward and 10 B backward each, one kernel; with the aux loss
     * 19 B and 36 B, four kernels each. */
    loom_moe_router_passes(4096, 128, false, &f, &b);
    CHECK_NEAR_REL(f.bytes, 7.0 * 524288, 1e-15);
    CHECK_NEAR_REL(b.bytes, 10.0 * 524288, 1e-15);
    loom_moe_router_passes(4096, 128, true, &f, &b);
    CHECK_NEAR_REL(f.bytes, 19.0 * 524288, 1e-15);
    CHECK_NEAR_REL(b.bytes, 36.0 * 524288, 1e-15);
    CHECK(f.kernels == 4 && b.kernels == 4);
}

/* ---- through the cost model and loom eval ---------------------------------------- */

#define SEQ 256
#define HID 512
#define EXPERTS 8
#define TOPK 2

static loom_graph *mixtral(loom_dtype dt, int64_t batch)
{
    cJSON *cfg = cJSON_Parse("{\"architectures\": [\"MixtralForCausalLM\"], \"model_type\": "
                             "\"mixtral\", \"hidden_size\": 512, \"intermediate_size\": 1024, "
                             "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
                             "\"num_key_value_heads\": 8, \"num_local_experts\": 8, "
                             "\"num_experts_per_tok\": 2, \"vocab_size\": 4096, "
                             "\"max_position_embeddings\": 4096}");
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = SEQ;
    o.batch = batch;
    o.dtype = dt;
    loom_graph *g = NULL;
    loom_error e;
    if (loom_model_build_hf("tiny", cfg, "tiny-mixtral", &o, &g, &e)) {
        fprintf(stderr, "build: %s\n", e.msg);
        exit(2);
    }
    cJSON_Delete(cfg);
    return g;
}

static int32_t op_named(const loom_graph *g, const char *suffix)
{
    for (int32_t i = 0; i < loom_graph_num_ops(g); i++) {
        const char *n = loom_graph_op(g, i)->name;
        size_t a = strlen(n), b = strlen(suffix);
        if (a >= b && strcmp(n + a - b, suffix) == 0) return i;
    }
    fprintf(stderr, "no op %s\n", suffix);
    exit(2);
}

static void test_cost_model(void)
{
    loom_cluster c;
    loom_error e;
    loom_cost_model *cm = NULL;
    CHECK_INT_EQ(loom_cluster_preset("dgx-h100-x1", &c, &e), LOOM_OK);
    CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &cm, &e), LOOM_OK);
    const loom_calib *cal = loom_cost_model_calib(cm);
    loom_graph *g = mixtral(LOOM_DTYPE_BF16, 1);

    /* Dispatch of layer 0 under EP 4: 256 tokens of 1024 B to 2 of 8
     * experts, 2 per rank. Rows 512; load factor over 4 ranks of 1024
     * tokens (each rank routes its 256); U = 524,288 B, X = 262,144 B,
     * P = 2048 B: permute X + U + P, sort 2·lf·(U + P); streaming
     * kernels at the streaming prior (eager_mem_eff, compute.c pass_s). */
    int32_t disp = op_named(g, "layers.0.block_sparse_moe.dispatch");
    double lf = loom_moe_max_load_factor(EXPERTS, TOPK, 4, 4.0 * SEQ);
    double bytes = 262144.0 + 526336.0 + 2 * lf * 526336.0;
    loom_op_time t;
    CHECK_INT_EQ(loom_cost_op_time_ep(cm, g, disp, NULL, 0, 4, &t, &e), LOOM_OK);
    double stream_s = bytes / (c.gpu.hbm_bw_Bps * cal->eager_mem_eff);
    CHECK_NEAR_REL(t.fwd_s, stream_s + 4 * cal->kernel_overhead_s, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, stream_s + 2 * cal->kernel_overhead_s, 1e-12);

    /* An expert GEMM under EP 4: the FLOPs of all 8 experts on the rank's
     * own 64 slots per expert (c = 256·2/8), as one grouped kernel of
     * 2 local experts, over the memory roofline of its input [8, 64, 512],
     * a quarter of the weights [8, 512, 1024] and its output [8, 64, 1024]
     * (bf16), plus one launch; the busiest rank runs lf times that. */
    int32_t w1 = op_named(g, "layers.0.block_sparse_moe.experts.w1");
    double flops = 2.0 * 8 * 64 * 512 * 1024, ovh = cal->kernel_overhead_s;
    double mem = loom_cost_memory_time_s(cm, 2.0 * (8.0 * 64 * 512 + 8.0 * 512 * 1024 / 4 +
                                                    8.0 * 64 * 1024));
    double gemm = loom_cost_grouped_gemm_time_s(cm, flops, 2, LOOM_DTYPE_BF16) - ovh;
    CHECK_INT_EQ(loom_cost_op_time_ep(cm, g, w1, NULL, 0, 4, &t, &e), LOOM_OK);
    CHECK(lf > 1.02);   /* 4.2%: 512 rows a rank */
    CHECK_NEAR_REL(t.fwd_s, lf * (fmax(gemm, mem) + ovh), 1e-12);
    /* without expert parallelism: all 8 experts local, no imbalance */
    CHECK_INT_EQ(loom_cost_op_time(cm, g, w1, NULL, 0, &t, &e), LOOM_OK);
    mem = loom_cost_memory_time_s(cm, 2.0 * (8.0 * 64 * 512 + 8.0 * 512 * 1024 + 8.0 * 64 * 1024));
    gemm = loom_cost_grouped_gemm_time_s(cm, flops, 8, LOOM_DTYPE_BF16) - ovh;
    CHECK_NEAR_REL(t.fwd_s, fmax(gemm, mem) + ovh, 1e-12);

    /* The planner's view of the same rank (solver/strategy.c): a graph of
     * the 4 ranks' tokens with the batch and "e" split 4 ways costs what
     * eval's graph of one rank's tokens costs under ep = 4. */
    loom_graph *g4 = mixtral(LOOM_DTYPE_BF16, 4);
    loom_dim_split ep4[2] = {{"b", 4}, {"e", 4}};
    loom_op_time t4;
    CHECK_INT_EQ(loom_cost_op_time(cm, g4, op_named(g4, "layers.0.block_sparse_moe.dispatch"), ep4,
                                   2, &t4, &e), LOOM_OK);
    CHECK_INT_EQ(loom_cost_op_time_ep(cm, g, disp, NULL, 0, 4, &t, &e), LOOM_OK);
    CHECK_NEAR_REL(t4.fwd_s, t.fwd_s, 1e-12);
    CHECK_NEAR_REL(t4.bwd_s, t.bwd_s, 1e-12);
    CHECK_INT_EQ(loom_cost_op_time(cm, g4, op_named(g4, "layers.0.block_sparse_moe.experts.w1"),
                                   &ep4[1], 1, &t4, &e), LOOM_OK);
    CHECK_INT_EQ(loom_cost_op_time_ep(cm, g, w1, NULL, 0, 4, &t, &e), LOOM_OK);
    CHECK_NEAR_REL(t4.fwd_s, t.fwd_s, 1e-12);
    loom_graph_destroy(g4);

    /* FP8: the router's gate stays bf16 (Megatron's own gating linear), the
     * experts' w1 casts the dispatched rows, w3 reuses that fp8 copy. */
    loom_graph *g8 = mixtral(LOOM_DTYPE_FP8, 1);
    int32_t gate = op_named(g, "layers.0.block_sparse_moe.gate");
    loom_op_time t16, t8;
    CHECK_INT_EQ(loom_cost_op_time(cm, g, gate, NULL, 0, &t16, &e), LOOM_OK);
    CHECK_INT_EQ(loom_cost_op_time(cm, g8, gate, NULL, 0, &t8, &e), LOOM_OK);
    CHECK_NEAR_REL(t8.fwd_s, t16.fwd_s, 1e-12);
    int32_t w3 = op_named(g8, "layers.0.block_sparse_moe.experts.w3");
    CHECK_INT_EQ(loom_cost_op_time(cm, g8, w1, NULL, 0, &t16, &e), LOOM_OK);
    CHECK_INT_EQ(loom_cost_op_time(cm, g8, w3, NULL, 0, &t8, &e), LOOM_OK);
    CHECK(t8.fwd_s < t16.fwd_s);
    CHECK_NEAR_REL(t8.bwd_s, t16.bwd_s, 1e-12);
    loom_graph_destroy(g8);

    /* loom eval, 8 GPUs, EP 4 (tp 1, dp 8), 2 micro-batches of one
     * sequence per rank: its exposed communication is only the experts'
     * (2 layers × 2 micro-batches) of the hand list above on a group of 4
     * GPUs in one node: all-gather of 8 · 8 · 4 = 256 B of counts, the
     * tokens' all-to-all (U = 256·2·1024·lf) twice in dispatch and twice in
     * combine, the probabilities' (256·2·4·lf) twice. */
    loom_parallel p;
    loom_parallel_init(&p);
    p.tp = 1, p.pp = 1, p.dp = 8, p.ep = 4, p.mbs = 1, p.gbs = 16, p.seq = SEQ;
    loom_eval_result r;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    loom_group grp = {4, 4};
    double U = 256.0 * 2 * 1024 * lf, P = 256.0 * 2 * 4 * lf;
    double layer = loom_group_collective_time_s(&c, cal, LOOM_COLL_ALL_GATHER, grp, 256) +
                   4 * loom_group_collective_time_s(&c, cal, LOOM_COLL_ALL_TO_ALL, grp, U) +
                   2 * loom_group_collective_time_s(&c, cal, LOOM_COLL_ALL_TO_ALL, grp, P);
    CHECK_INT_EQ(r.microbatches, 2);
    CHECK_NEAR_REL(r.breakdown.tp_comm_s, 2 * 2 * layer, 1e-9);
    loom_eval_result_free(&r);

    /* MoE parallel folding (Megatron-Core: the expert groups laid over the
     * tp·cp·dp ranks in the order etp-ep-edp): tp 2 × dp 4 with expert TP 1
     * holds EP 8, a group spanning the tensor-parallel pairs, each expert
     * on 8 / (1·8) = 1 rank; EP 4 leaves 2 copies; with expert TP 2 (the
     * default, etp = tp) EP 8 would need 16 ranks. */
    p.tp = 2, p.dp = 4, p.sp = true, p.etp = 1, p.ep = 8, p.gbs = 8;
    CHECK_INT_EQ(loom_parallel_expert_tp(&p), 1);
    CHECK_INT_EQ(loom_parallel_expert_dp(&p), 1);
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    loom_eval_result_free(&r);
    p.ep = 4;
    CHECK_INT_EQ(loom_parallel_expert_dp(&p), 2);
    p.etp = 0, p.ep = 8;
    CHECK_INT_EQ(loom_parallel_expert_tp(&p), 2);
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "--ep 8 × expert TP 2 must divide tp × dp × cp = 8");

    /* Expert TP strictly between 1 and the TP (Megatron's
     * --expert-tensor-parallel-size; parallel_state.py only asks that
     * etp · ep · pp divide the world): tp 4 × dp 2, EP 2. A GPU holds
     * 8 / 2 = 4 experts of each of the 2 layers, each of 3 · h · f =
     * 3 · 512 · 1024 weights split etp ways, and everything else as at any
     * etp: halving etp adds 2 · 4 · 3 · 512 · 1024 · (1/etp' - 1/etp). */
    int64_t params[3];
    p.tp = 4, p.dp = 2, p.ep = 2, p.gbs = 8;
    for (int i = 0; i < 3; i++) {
        p.etp = i == 2 ? 0 : (int64_t)1 << i;   /* 1, 2, and 4 (= tp) */
        CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
        params[i] = r.stages[0].mem.params;
        loom_eval_result_free(&r);
    }
    int64_t experts_here = 2 * 4 * 3 * 512 * 1024;
    CHECK_INT_EQ(params[1] - params[2], experts_here / 2 - experts_here / 4);
    CHECK_INT_EQ(params[0] - params[1], experts_here - experts_here / 2);
    loom_graph_destroy(g);
    loom_cost_model_destroy(cm);
}

/* HybridEP across nodes in loom eval: 8 GPUs as 2 nodes of 4, EP 8 over
 * the 8 experts (one each), top 2. A token's other node holds neither of
 * its experts with probability 4·3 / (8·7) = 3/14, so 11/14 copies cross
 * the NIC per token, and 3/4 of the dispatched rows ride NVLink (all but
 * those landing on the GPU that holds or receives them). Per layer and
 * micro-batch: the counts' all-gather (NCCL), then every all-to-all as
 * max(NVLink bytes / bw + α, NIC bytes / bw + α). */
static void test_hybridep_eval(void)
{
    loom_cluster c;
    loom_error e;
    loom_cost_model *cm = NULL;
    CHECK_INT_EQ(loom_cluster_preset("dgx-h100-x1", &c, &e), LOOM_OK);
    c.nodes = 2, c.gpus_per_node = 4;
    c.inter = (loom_link){50e9, 8e-6};
    CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &cm, &e), LOOM_OK);
    const loom_calib *cal = loom_cost_model_calib(cm);
    loom_graph *g = mixtral(LOOM_DTYPE_BF16, 1);
    loom_parallel p;
    loom_parallel_init(&p);
    p.tp = 1, p.pp = 1, p.dp = 8, p.ep = 8, p.mbs = 1, p.gbs = 16, p.seq = SEQ;
    p.moe_hybridep = true;
    loom_eval_result r;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    double lf = loom_moe_max_load_factor(EXPERTS, TOPK, 8, 8.0 * SEQ);
    double U = 256.0 * 2 * 1024 * lf, P = 256.0 * 2 * 4 * lf;
    double across = 11.0 / 14 / 2;   /* of the k = 2 rows per token */
    loom_group grp = {8, 4};
    double split_u = fmax(0.75 * U / (c.intra.bandwidth_Bps * cal->intra_link_eff) +
                              c.intra.latency_s,
                          across * U / (50e9 * cal->inter_link_eff) + 8e-6);
    double split_p = fmax(0.75 * P / (c.intra.bandwidth_Bps * cal->intra_link_eff) +
                              c.intra.latency_s,
                          across * P / (50e9 * cal->inter_link_eff) + 8e-6);
    double layer = loom_group_collective_time_s(&c, cal, LOOM_COLL_ALL_GATHER, grp, 512) +
                   4 * split_u + 2 * split_p;
    CHECK_NEAR_REL(r.breakdown.tp_comm_s, 2 * 2 * layer, 1e-9);
    /* NCCL's flat all-to-all sends k · 4/8 = 1 row per token across, not 11/14 */
    double hyb = r.breakdown.tp_comm_s;
    loom_eval_result_free(&r);
    p.moe_hybridep = false;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK(r.breakdown.tp_comm_s > hyb);
    loom_eval_result_free(&r);
    loom_graph_destroy(g);
    loom_cost_model_destroy(cm);
}

int main(void)
{
    test_expected_max();
    test_load_factor();
    test_bytes();
    test_remote_domain_copies();
    test_cost_model();
    test_hybridep_eval();
    return check_done();
}
