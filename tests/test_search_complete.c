/*
 * test_search_complete.c — issue 19's property by brute force: on small
 * cases, NO configuration `loom eval` accepts beats the plan.
 *
 * For each case (8 H100s) the test plans twice in-process, Megatron's space
 * (loom plan --space megatron) and the full space, the search picking the
 * ZeRO stage, then enumerates every configuration of the space below,
 * evaluates each with loom eval's model (loom_eval_megatron, costs/eval.c)
 * and checks that none that fits is faster than the Megatron-space plan by
 * more than 0.1 % (the two evaluators' agreement, tests/test_consistency.c)
 * nor faster than the full-space plan at all.
 *
 * The space, over the 8 GPUs: every tp · cp · pp · dp = 8 with tp, cp, dp
 * powers of two (heads and kv heads as loom_parallel_check wants them);
 * micro-batch 1, 2, 4, 8 dividing gbs / dp; 1F1B and interleaving at every
 * depth v with pp · v dividing the layers and the micro-batches a multiple
 * of pp (Megatron's interleaved schedule); Megatron's default split (even,
 * or first and last stage lighter when pp does not divide the layers);
 * sequence parallelism off and on, TP communication overlap (with SP);
 * context parallelism with ring attention; recompute none, selective,
 * full, and full on k = 1 .. (blocks per chunk - 1) blocks per chunk
 * (per virtual chunk, as Megatron counts --recompute-num-layers);
 * ZeRO 0-3 (2 and 3 without pipelining). Pipeline layouts apart (the cases
 * above plan without pipelining): run_layouts sweeps every first/last
 * split at a pinned PP where the head's weight matters.
 *
 * The cases are chosen so that every dimension matters somewhere: GPT-2
 * (tied embeddings, 12 layers: interleaving up to 6), Llama-3.2-1B at
 * sequence 8192 (context parallelism pays), Llama-3-8B at sequence 8192
 * with a global batch of 16 (memory is tight: recompute and ZeRO choices),
 * gpt-oss-20b (mixture of experts, 32 experts: every expert-parallel size
 * 1 .. 32 over the tp x cp x dp ranks is swept too, with every expert TP
 * dividing the TP: those strictly between 1 and the TP, which the
 * planner's space leaves out, must not win either), and Llama-3.2-1B with
 * unfused attention (selective recompute reruns something; no CP).
 * That the check can fail is checked too: planned without context
 * parallelism and TP communication overlap (--no-cp --no-tp-comm-overlap,
 * the spaces before issue 19), the long-sequence cases are beaten in both
 * spaces, gpt-oss-20b in the Megatron space only: since its experts'
 * eager output-bias kernels are priced (costs/compute.c) the full space's
 * best plan for it, 0.580 s, uses neither (the same time with and without).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "costs/eval.h"
#include "graph/model.h"
#include "solver/stage_search.h"
#include "tests/check.h"

typedef struct {
    const char *model, *cluster;
    int64_t gbs, seq;
    bool unfused;                       /* eager attention: selective recompute matters */
} bf_case;

typedef struct {
    int64_t evaluated, fitting;
    double *fit_s;                      /* [fitting] step times of those that fit */
    int64_t *fit_ep;                    /* [fitting] their expert-parallel sizes */
    int64_t cap;
    double best_s;
    loom_parallel best;
    double best_mid_etp_s;              /* best that fits with 1 < etp < tp (MoE) */
} bf_tally;

/* The plan's step time in one space (search picks ZeRO, as loom plan does);
 * `narrow`: without context parallelism and TP communication overlap. */
static double plan_step_ep(const bf_case *k, loom_cost_model *cm, const loom_model_source *src,
                           bool megatron, bool narrow, int64_t pin_ep);

static double plan_step(const bf_case *k, loom_cost_model *cm, const loom_model_source *src,
                        bool megatron, bool narrow)
{
    return plan_step_ep(k, cm, src, megatron, narrow, 0);
}

/* ... with the expert-parallel size pinned (loom plan --ep; 0: searched) */
static double plan_step_pins(const bf_case *k, loom_cost_model *cm, const loom_model_source *src,
                             bool megatron, bool narrow, int64_t pin_ep, int64_t pin_pp,
                             int64_t pin_tp, int64_t pin_cp);

static double plan_step_ep(const bf_case *k, loom_cost_model *cm, const loom_model_source *src,
                           bool megatron, bool narrow, int64_t pin_ep)
{
    return plan_step_pins(k, cm, src, megatron, narrow, pin_ep, 0, 0, 0);
}

/* ... and the pipeline, TP and CP sizes too (loom plan --pp --tp --cp) */
static double plan_step_pins(const bf_case *k, loom_cost_model *cm, const loom_model_source *src,
                             bool megatron, bool narrow, int64_t pin_ep, int64_t pin_pp,
                             int64_t pin_tp, int64_t pin_cp)
{
    loom_problem pb;
    loom_problem_init(&pb);
    pb.model = src, pb.cm = cm, pb.gbs = k->gbs, pb.seq = k->seq;
    pb.flash_attention = !k->unfused;
    loom_search_options o;
    loom_search_options_init(&o);
    o.megatron_only = megatron;
    o.no_context_parallel = o.no_tp_comm_overlap = narrow;
    o.pin_ep = pin_ep, o.pin_pp = pin_pp, o.pin_tp = pin_tp, o.pin_cp = pin_cp;
    loom_search *s = NULL;
    const loom_search_result *res;
    loom_error err = {0};
    double t = INFINITY;
    if (loom_search_create(&pb, &o, &s, &err) || loom_search_run(s, &res, &err))
        fprintf(stderr, "%s: %s\n", k->model, err.msg);
    else
        t = res->eval.step_s;
    loom_search_destroy(s);
    return t;
}

static void tally(const loom_graph *g, loom_cost_model *cm, const loom_parallel *p, bf_tally *t)
{
    loom_eval_result r;
    loom_error err;
    if (loom_eval_megatron(g, cm, p, &r, &err) == LOOM_OK) {
        t->evaluated++;
        if (r.fits) {
            if (t->fitting == t->cap) {
                t->cap = t->cap ? 2 * t->cap : 4096;
                double *n = realloc(t->fit_s, sizeof *n * (size_t)t->cap);
                LOOM_ASSERT(n != NULL);
                t->fit_s = n;
                int64_t *e = realloc(t->fit_ep, sizeof *e * (size_t)t->cap);
                LOOM_ASSERT(e != NULL);
                t->fit_ep = e;
            }
            t->fit_ep[t->fitting] = p->ep;
            t->fit_s[t->fitting++] = r.step_time_s;
            /* the best with an expert TP strictly between 1 and the TP */
            if (p->etp > 1 && r.step_time_s < t->best_mid_etp_s) t->best_mid_etp_s = r.step_time_s;
            if (r.step_time_s < t->best_s) t->best_s = r.step_time_s, t->best = *p;
        }
    }
    loom_eval_result_free(&r);
}

/* Fitting configurations faster than plan_s by more than rel. */
static int64_t beating(const bf_tally *t, double plan_s, double rel)
{
    int64_t n = 0;
    for (int64_t i = 0; i < t->fitting; i++) n += t->fit_s[i] < plan_s * (1 - rel);
    return n;
}

/* ... among those with expert-parallel size ep */
static int64_t beating_ep(const bf_tally *t, double plan_s, double rel, int64_t ep)
{
    int64_t n = 0;
    for (int64_t i = 0; i < t->fitting; i++)
        n += t->fit_ep[i] == ep && t->fit_s[i] < plan_s * (1 - rel);
    return n;
}

/* Every recompute, ZeRO, SP and TP-overlap choice of degrees p. */
static void sweep_rest(const loom_graph *g, loom_cost_model *cm, loom_parallel p, int64_t blocks,
                       bf_tally *t);

/* ... and for a MoE model every expert-parallel size: powers of two up to
 * the experts, and every expert TP dividing the TP (1 .. tp: Megatron's
 * --expert-tensor-parallel-size, which the planner's space holds at 1 or
 * tp only), over the tp x cp x dp ranks as Megatron-Core's MoE parallel
 * folding allows (loom eval refuses the rest). */
static void sweep_ep(const loom_graph *g, loom_cost_model *cm, loom_parallel p, int64_t blocks,
                     bf_tally *t)
{
    int64_t experts = loom_graph_info_c(g)->experts;
    for (p.ep = 1; p.ep <= (experts > 0 ? experts : 1); p.ep *= 2)
        for (int64_t etp = 1; etp <= (experts > 0 ? p.tp : 1); etp *= 2) {
            p.etp = experts > 0 && etp < p.tp ? etp : 0;
            sweep_rest(g, cm, p, blocks, t);
        }
}

static void sweep_rest(const loom_graph *g, loom_cost_model *cm, loom_parallel p, int64_t blocks,
                       bf_tally *t)
{
    /* --recompute-num-layers counts in each virtual chunk (Megatron's
     * block method runs per TransformerBlock, one per chunk) */
    int64_t per_chunk = blocks / (p.pp * p.vpp);
    if (p.first_stage_layers) {   /* uneven: the fullest stage's blocks */
        int64_t f = p.first_stage_layers, l = p.last_stage_layers;
        per_chunk = p.pp > 2 ? (blocks - f - l) / (p.pp - 2) : 0;
        per_chunk = f > per_chunk ? f : per_chunk;
        per_chunk = l > per_chunk ? l : per_chunk;
    }
    for (int sp = 0; sp < (p.tp > 1 ? 3 : 1); sp++) {   /* off, on, on + overlap */
        p.sp = sp > 0;
        p.tp_comm_overlap = sp == 2;
        for (int z = 0; z <= (p.pp == 1 ? 3 : 1); z++) {
            p.zero = z;
            for (int rc = 0; rc < 3; rc++) {
                p.recompute = (loom_recompute)rc;
                p.recompute_layers = 0;
                tally(g, cm, &p, t);
                for (int64_t kk = 1; rc == LOOM_RECOMPUTE_FULL && kk < per_chunk; kk++) {
                    p.recompute_layers = kk;
                    tally(g, cm, &p, t);
                }
            }
        }
    }
}

/* Pipeline layouts, where they matter: Qwen3-8B (a 151,936-token
 * vocabulary: its head weighs about 3 of its 36 blocks) on 8 H100 with PP
 * 4 and TP 2 pinned, gbs 32, seq 4096. Every first/last stage split with
 * the middle stages sharing the rest evenly (1F1B; any number of blocks
 * lighter or heavier), and every even interleaving, with every micro-batch,
 * recompute (partial too), SP, overlap and ZeRO choice: none beats the
 * Megatron-space plan by more than the evaluators' 0.1 %. (The plan is
 * interleaved with a last chunk 3 blocks lighter than the others, which
 * loom eval reads only as a Megatron layout; the 1F1B splits here bound
 * it.) */
static void run_layouts(void)
{
    const bf_case k = {"examples/models/qwen3-8b.json", "dgx-h100-x1", 32, 4096, false};
    const int64_t PP = 4, TP = 2;
    loom_cluster c;
    loom_error err = {0};
    loom_cost_model *cm = NULL;
    loom_model_source *src = NULL;
    bf_tally t = {.best_s = INFINITY, .best_mid_etp_s = INFINITY};
    int64_t layouts = 0;
    if (loom_cluster_preset(k.cluster, &c, &err) ||
        loom_cost_model_create(&c, NULL, NULL, &cm, &err) || loom_model_open(k.model, &src, &err)) {
        fprintf(stderr, "%s: %s\n", k.model, err.msg);
        CHECK(false);
        goto done;
    }
    double meg = plan_step_pins(&k, cm, src, true, false, 0, PP, TP, 1);
    CHECK(isfinite(meg));
    int64_t dp = loom_cluster_gpus(&c) / (PP * TP);
    for (int64_t mbs = 1; mbs <= 8 && k.gbs % (mbs * dp) == 0; mbs *= 2) {
        loom_model_opts mo;
        loom_model_opts_init(&mo);
        mo.seq = k.seq, mo.batch = mbs;
        loom_graph *g = NULL;
        if (loom_model_source_build(src, &mo, &g, &err)) {
            CHECK(false);
            goto done;
        }
        int64_t L = loom_graph_info_c(g)->layers, M = k.gbs / (mbs * dp);
        loom_parallel p;
        loom_parallel_init(&p);
        p.tp = TP, p.pp = PP, p.dp = dp, p.cp = 1, p.mbs = mbs, p.gbs = k.gbs, p.seq = k.seq;
        for (int64_t f = 1; f < L; f++)
            for (int64_t l = 1; f + l < L; l++) {
                int64_t mid = L - f - l;
                if (mid < PP - 2 || mid % (PP - 2) || (f == L / PP && l == L / PP)) continue;
                loom_parallel u = p;
                u.first_stage_layers = f, u.last_stage_layers = l;
                sweep_rest(g, cm, u, L, &t);
                layouts++;
            }
        for (int64_t v = 1; v <= L / PP; v++) {
            if (L % (PP * v) || (v > 1 && M % PP)) continue;
            p.vpp = v;
            sweep_rest(g, cm, p, L, &t);
            layouts++;
        }
        loom_graph_destroy(g);
    }
    const loom_parallel *b = &t.best;
    int64_t n = beating(&t, meg, 0.001);
    printf("%s on %s, pp %lld tp %lld: plans %.5g s (Megatron space); %lld layouts, %lld "
           "configurations evaluated, %lld fit, best %.5g s (first/last %lld/%lld, vpp %lld, mbs "
           "%lld, recompute %s/%lld); faster than the plan by > 0.1%%: %lld\n",
           k.model, k.cluster, (long long)PP, (long long)TP, meg, (long long)layouts,
           (long long)t.evaluated, (long long)t.fitting, t.best_s,
           (long long)b->first_stage_layers, (long long)b->last_stage_layers, (long long)b->vpp,
           (long long)b->mbs, loom_recompute_name(b->recompute), (long long)b->recompute_layers,
           (long long)n);
    CHECK(t.fitting > 100);
    CHECK_INT_EQ(n, 0);
done:
    free(t.fit_s);
    free(t.fit_ep);
    loom_model_source_destroy(src);
    loom_cost_model_destroy(cm);
}

static void run_case(const bf_case *k, bool narrow_loses)
{
    loom_cluster c;
    loom_error err = {0};
    loom_cost_model *cm = NULL;
    loom_model_source *src = NULL;
    loom_graph *graphs[4] = {0};
    bf_tally t = {.best_s = INFINITY, .best_mid_etp_s = INFINITY};
    if (loom_cluster_preset(k->cluster, &c, &err) ||
        loom_cost_model_create(&c, NULL, NULL, &cm, &err) || loom_model_open(k->model, &src, &err)) {
        fprintf(stderr, "%s: %s\n", k->model, err.msg);
        CHECK(false);
        goto done;
    }
    double meg = plan_step(k, cm, src, true, false), full = plan_step(k, cm, src, false, false);
    double meg0 = plan_step(k, cm, src, true, true), full0 = plan_step(k, cm, src, false, true);
    CHECK(isfinite(meg) && isfinite(full) && isfinite(meg0) && isfinite(full0));
    CHECK(full <= meg * (1 + 1e-12));   /* the full space contains Megatron's */
    const int64_t G = loom_cluster_gpus(&c);
    for (int bi = 0; bi < 4; bi++) {
        int64_t mbs = (int64_t)1 << bi;
        loom_model_opts mo;
        loom_model_opts_init(&mo);
        mo.seq = k->seq, mo.batch = mbs;
        mo.flash_attention = !k->unfused;
        if (loom_model_source_build(src, &mo, &graphs[bi], &err)) {
            CHECK(false);
            goto done;
        }
        const loom_model_info *mi = loom_graph_info_c(graphs[bi]);
        int64_t L = mi->layers;
        for (int64_t tp = 1; tp <= G; tp *= 2)
            for (int64_t cp = 1; tp * cp <= G; cp *= 2)
                for (int64_t pp = 1; tp * cp * pp <= G && pp <= L; pp++) {
                    if (G % (tp * cp * pp)) continue;
                    int64_t dp = G / (tp * cp * pp);
                    if (k->gbs % (mbs * dp)) continue;
                    int64_t M = k->gbs / (mbs * dp);
                    loom_parallel p;
                    loom_parallel_init(&p);
                    p.tp = tp, p.cp = cp, p.pp = pp, p.dp = dp, p.mbs = mbs, p.gbs = k->gbs;
                    p.seq = k->seq;
                    p.flash = !k->unfused;
                    if (L % pp) {   /* Megatron's first and last stage lighter */
                        int64_t q = (L + pp - 1) / pp, r = pp * q - L;
                        p.first_stage_layers = q - (r + 1) / 2;
                        p.last_stage_layers = q - r / 2;
                        if (p.first_stage_layers < 1) continue;
                        sweep_ep(graphs[bi], cm, p, L, &t);
                        continue;
                    }
                    for (int64_t v = 1; v <= L / pp; v++) {
                        if (L % (pp * v) || (v > 1 && (pp < 2 || M % pp))) continue;
                        p.vpp = v;
                        sweep_ep(graphs[bi], cm, p, L, &t);
                    }
                }
    }
    const loom_parallel *b = &t.best;
    /* On the MoE case the full-space plan is held to the same 0.1 % as the
     * Megatron one: the two evaluators price the expert dispatcher apart
     * by up to that much (gpt-oss-20b: eval's best, TP 2 x CP 4 x EP 4,
     * 0.03 % below the planner's figure for it), so eval can rank it a
     * hair above a plan the planner's evaluator ranks first. */
    bool moe = loom_graph_info_c(graphs[0])->experts > 0;
    int64_t bm = beating(&t, meg, 0.001), bf = beating(&t, full, moe ? 0.001 : 1e-9);
    int64_t bm0 = beating(&t, meg0, 0.001), bf0 = beating(&t, full0, 1e-9);
    printf("%s%s on %s (gbs %lld, seq %lld): plans %.5g s (Megatron space), %.5g s (full); "
           "%lld configurations evaluated, %lld fit, best %.5g s (tp %lld cp %lld ep %lld pp %lld "
           "dp %lld mbs %lld vpp %lld%s%s, recompute %s/%lld, ZeRO-%d); faster than the "
           "Megatron plan by > 0.1%%: %lld, than the full plan: %lld; without CP and TP "
           "overlap the plans are %.5g s / %.5g s, beaten by %lld / %lld\n",
           k->model, k->unfused ? " (unfused attention)" : "", k->cluster, (long long)k->gbs, (long long)k->seq, meg, full,
           (long long)t.evaluated, (long long)t.fitting, t.best_s, (long long)b->tp,
           (long long)b->cp, (long long)b->ep, (long long)b->pp, (long long)b->dp, (long long)b->mbs,
           (long long)b->vpp, b->sp ? " sp" : "", b->tp_comm_overlap ? " overlap" : "",
           loom_recompute_name(b->recompute), (long long)b->recompute_layers, b->zero,
           (long long)bm, (long long)bf, meg0, full0, (long long)bm0, (long long)bf0);
    CHECK(t.fitting > 100);   /* the sweep really ran */
    CHECK_INT_EQ(bm, 0);
    CHECK_INT_EQ(bf, 0);
    if (narrow_loses) CHECK(bm0 > 0 && (moe || bf0 > 0));
    /* --ep pins (MoE): each pinned plan has a configuration of that EP
     * behind it and no configuration of that EP beats it by more than the
     * evaluators' 0.1 %. A pin only removes options, yet the pinned plan
     * may beat the unpinned one by a hair: the search evaluates exactly
     * only the option its table estimate ranks first per split and kind
     * (gpt-oss-20b, EP 4: 0.55759 s pinned, 0.55774 s unpinned), so the
     * two are compared at the same 0.1 % */
    if (moe) {
        /* expert TP strictly between 1 and the TP was swept: it fits
         * somewhere and never wins (the Megatron space leaves it out) */
        printf("  best with 1 < expert TP < TP: %.5g s\n", t.best_mid_etp_s);
        CHECK(isfinite(t.best_mid_etp_s) && t.best_mid_etp_s >= meg * (1 - 0.001));
    }
    for (int64_t ep = 1; moe && ep <= 8; ep *= 2) {
        double pinned = plan_step_ep(k, cm, src, true, false, ep);
        int64_t n = beating_ep(&t, pinned, 0.001, ep), with = 0;
        for (int64_t i = 0; i < t.fitting; i++) with += t.fit_ep[i] == ep;
        printf("  --ep %lld: plans %.5g s; %lld configurations of EP %lld fit, %lld faster by > 0.1%%\n",
               (long long)ep, pinned, (long long)with, (long long)ep, (long long)n);
        CHECK(isfinite(pinned) && pinned >= meg * (1 - 0.001) && with > 0);
        CHECK_INT_EQ(n, 0);
    }
done:
    free(t.fit_s);
    free(t.fit_ep);
    for (int i = 0; i < 4; i++) loom_graph_destroy(graphs[i]);
    loom_model_source_destroy(src);
    loom_cost_model_destroy(cm);
}

int main(void)
{
    static const bf_case cases[] = {
        {"examples/models/gpt2.json", "dgx-h100-x1", 64, 1024, false},
        {"tests/data/llama-3.2-1b.json", "dgx-h100-x1", 32, 8192, false},
        {"examples/models/llama-3-8b.json", "dgx-h100-x1", 16, 8192, false},
        {"examples/models/gpt-oss-20b.json", "dgx-h100-x1", 16, 4096, false},
        {"tests/data/llama-3.2-1b.json", "dgx-h100-x1", 32, 8192, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], i > 0);
    run_layouts();
    return check_done();
}
