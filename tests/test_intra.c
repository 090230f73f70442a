/*
 * test_intra.c — intra-operator planning end to end (solver/intra.h,
 * solver/merge.h): known answers (Megatron tensor parallelism on one node,
 * data parallelism for a tiny model with a large batch, the intra-node axis
 * carrying the per-micro-batch traffic on a two-node mesh), exactness of the
 * layer ILP against brute force and the chain DP, memory budgets,
 * periodic layer sharing against an explicitly solved ring of 4 layers, the
 * cache, and argument errors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "costs/compute.h"
#include "solver/intra.h"
#include "solver/merge.h"
#include "tests/check.h"
#include "tests/solver_graphs.h"

static loom_cluster cl8, cl4x2;
static loom_cost_model *cm8, *cm4x2;

static double coll(const loom_cost_model *cm, loom_collective k, loom_mesh_shape m, int axis,
                   double bytes)
{
    const loom_cluster *c = loom_cost_model_cluster(cm);
    return loom_group_collective_time_s(c, loom_cost_model_calib(cm), k,
                                        loom_mesh_axis_group(c, m, axis), bytes);
}

/* Spec text of operand k of op (from a few rotating buffers, so that a
 * CHECK may compare two). */
static const char *spec_text(const loom_intra_result *r, const loom_graph *g, int32_t op,
                             loom_operand which, int k)
{
    static char buf[4][96];
    static int next;
    loom_spec sp;
    if (!loom_intra_op_spec(r, g, op, which, k, &sp)) return NULL;
    char *s = buf[next++ % 4];
    loom_spec_format(&sp, loom_graph_tensor(g, loom_intra_operand(g, op, which, k)), s, 96);
    return s;
}

static const char *spec(const loom_intra_result *r, const loom_graph *g, const char *op,
                        loom_operand which, int k)
{
    const char *s = spec_text(r, g, sg_find(g, op), which, k);
    return s ? s : "(none)";
}

/* What a backward collective of comm_s on an input gradient of `op` adds:
 * it runs beside the op's backward GEMMs, half its backward time
 * (loom_cost_op_time of the op split `parts` ways along `dim`), as
 * Megatron's column-parallel linear overlaps the input gradient's
 * reduction with the wgrad GEMM (solver/merge_edges.c, costs/eval.c). */
static double beside_bwd(const loom_graph *g, const char *op, const char *dim, int64_t parts,
                         double comm_s)
{
    loom_dim_split sp = {dim, parts};
    loom_op_time t;
    loom_error e;
    CHECK(loom_cost_op_time(cm8, g, sg_find(g, op), &sp, 1, &t, &e) == LOOM_OK);
    return comm_s > t.bwd_s / 2 ? comm_s - t.bwd_s / 2 : 0;
}

#define CHECK_SPEC(r, g, op, which, k, want)                              \
    do {                                                                 \
        const char *got_ = spec(r, g, op, which, k);                     \
        if (strcmp(got_, want)) fprintf(stderr, "%s: %s\n", op, got_);   \
        CHECK(strcmp(got_, want) == 0);                                  \
    } while (0)

/* One Llama-3-8B layer (h 4096, 32 heads, 8 kv heads, f 14336), batch 1,
 * sequence 4096, on (1, 8) inside an H100 node: Megatron tensor
 * parallelism. q/k/v and gate/up split their output heads / f (column
 * parallel), o_proj and down_proj their contraction (row parallel); per
 * layer forward two all-reduces of the b·s·h activations as
 * reduce-scatter + all-gather pairs (sequence parallelism), backward the
 * row-parallel outputs' all-gathers (one all-reduce's worth: 3 all-reduces
 * of 4096·4096·2 bytes so far) and the column-parallel inputs'
 * reduce-scatters, which run beside q_proj's and gate_proj's wgrad GEMMs.
 * In Megatron's space those layers also keep their input sequence-sharded
 * and gather it again beside the dgrad GEMM (Korthikanti et al. 2022). */
static void llama_8b_tensor_parallel(void)
{
    sg_llama d = {.b = 1, .s = 4096, .h = 4096, .heads = 32, .kvh = 8, .dh = 128, .f = 14336, .layers = 3};
    loom_graph *g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (!g) return;
    loom_intra_opts o;
    loom_intra_opts_init(&o);
    loom_intra_result r;
    loom_error e;
    loom_mesh_shape m = {1, 8};
    CHECK(loom_intra_solve(g, cm8, 2, 2, m, &o, &r, &e) == LOOM_OK);
    CHECK_INT_EQ(r.status, LOOM_ILP_OPTIMAL);
    CHECK_SPEC(&r, g, "L2.q_proj", LOOM_OPERAND_WEIGHT, 0, "h heads@1 dh");
    CHECK_SPEC(&r, g, "L2.k_proj", LOOM_OPERAND_WEIGHT, 0, "h kvh@1 dh");
    CHECK_SPEC(&r, g, "L2.v_proj", LOOM_OPERAND_WEIGHT, 0, "h kvh@1 dh");
    CHECK_SPEC(&r, g, "L2.o_proj", LOOM_OPERAND_WEIGHT, 0, "heads@1 dh h");
    CHECK_SPEC(&r, g, "L2.gate_proj", LOOM_OPERAND_WEIGHT, 0, "h f@1");
    CHECK_SPEC(&r, g, "L2.up_proj", LOOM_OPERAND_WEIGHT, 0, "h f@1");
    CHECK_SPEC(&r, g, "L2.down_proj", LOOM_OPERAND_WEIGHT, 0, "f@1 h");
    CHECK_SPEC(&r, g, "L2.sdpa", LOOM_OPERAND_INPUT, 0, "b s heads@1 dh");
    double B = 4096.0 * 4096 * 2, rs = coll(cm8, LOOM_COLL_REDUCE_SCATTER, m, 1, B);
    double hidden_q = beside_bwd(g, "L2.q_proj", "heads", 8, rs);
    double hidden_g = beside_bwd(g, "L2.gate_proj", "f", 8, rs);
    CHECK(hidden_q < rs && hidden_g < rs);   /* some of it is hidden */
    CHECK_NEAR_REL(r.comm_s, 3 * coll(cm8, LOOM_COLL_ALL_REDUCE, m, 1, B) + hidden_q + hidden_g,
                   1e-9);
    /* the parameters of a layer split 8 ways (the norms' 2h stay whole) */
    int64_t layer_params = 4096LL * 128 * (32 + 8 + 8 + 32) + 3LL * 4096 * 14336;
    CHECK_INT_EQ(r.param_count_per_gpu, layer_params / 8 + (r.param_count_per_gpu - layer_params / 8));
    CHECK(r.param_count_per_gpu - layer_params / 8 <= 2 * 4096);
    CHECK_INT_EQ(r.ops_before_merge, 15);
    CHECK(r.ops_after_merge < 15);
    CHECK(r.core_vars < r.n_vars);   /* exact elimination leaves GLPK less */
    printf("llama-3-8b layer on 1x8: %.3f ms (comm %.3f ms), ILP %d vars %d cons, %d -> %d nodes, "
           "solved in %.1f ms\n", r.time_s * 1e3, r.comm_s * 1e3, r.n_vars, r.n_cons,
           r.ops_before_merge, r.ops_after_merge, r.solve_time_s * 1e3);
    loom_intra_result_free(&r);

    /* Restricted to Megatron's space the answer is the same plan, plus the
     * re-gathers of the sequence-sharded inputs (an all-gather is as long
     * as a reduce-scatter here), which keep 1/8 of those inputs saved. */
    int64_t act_full = r.act_bytes_per_gpu;
    o.megatron_only = true;
    CHECK(loom_intra_solve(g, cm8, 2, 2, m, &o, &r, &e) == LOOM_OK);
    CHECK_SPEC(&r, g, "L2.down_proj", LOOM_OPERAND_WEIGHT, 0, "f@1 h");
    CHECK_NEAR_REL(r.comm_s,
                   3 * coll(cm8, LOOM_COLL_ALL_REDUCE, m, 1, B) + 2 * (hidden_q + hidden_g), 1e-9);
    CHECK_INT_EQ(act_full - r.act_bytes_per_gpu, 2 * (int64_t)B * 7 / 8);
    loom_intra_result_free(&r);
    loom_graph_destroy(g);
}

/* The MLP block of the brief: norm -> fc1 -> gelu -> fc2 -> residual, h 4096,
 * f 16384, batch 4 x 2048 tokens (with 8 x 2048 the activations weigh as
 * much as a weight matrix and data parallelism ties with tensor
 * parallelism exactly). On (1, 8) it is column-then-row parallel:
 * fc1 splits f in its weight's columns, fc2 in its rows, and the block pays
 * one all-reduce of the b·s·h output forward and one of the input gradient
 * backward (or the same traffic as RS + AG pairs). With a huge batch on
 * (8, 1) it is data parallel. */
static void mlp_block(void)
{
    loom_graph *g = sg_mlp_build(4, 2048, 4096, 16384);
    CHECK(g != NULL);
    if (!g) return;
    loom_intra_opts o;
    loom_intra_opts_init(&o);
    loom_intra_result r;
    loom_error e;
    loom_mesh_shape m = {1, 8};
    CHECK(loom_intra_solve(g, cm8, 0, 0, m, &o, &r, &e) == LOOM_OK);
    CHECK_SPEC(&r, g, "fc1", LOOM_OPERAND_WEIGHT, 0, "h f@1");
    CHECK_SPEC(&r, g, "fc2", LOOM_OPERAND_WEIGHT, 0, "f@1 h");
    /* sequence parallel around the block: RS + AG forward (one all-reduce),
     * fc2's all-gather backward, fc1's input reduce-scatter beside its
     * wgrad GEMM */
    CHECK_SPEC(&r, g, "fc2", LOOM_OPERAND_OUTPUT, 0, "b s@1 h");
    double Bm = 4.0 * 2048 * 4096 * 2;
    CHECK_NEAR_REL(r.comm_s,
                   coll(cm8, LOOM_COLL_ALL_REDUCE, m, 1, Bm) + coll(cm8, LOOM_COLL_ALL_GATHER, m, 1, Bm) +
                       beside_bwd(g, "fc1", "f", 8, coll(cm8, LOOM_COLL_REDUCE_SCATTER, m, 1, Bm)),
                   1e-9);
    loom_intra_result_free(&r);
    loom_graph_destroy(g);

    g = sg_mlp_build(1024, 2048, 4096, 16384);
    CHECK(g != NULL);
    if (!g) return;
    CHECK(loom_intra_solve(g, cm8, 0, 0, (loom_mesh_shape){8, 1}, &o, &r, &e) == LOOM_OK);
    for (int32_t op = 0; op < loom_graph_num_ops(g); op++) {
        /* batch or sequence: both split the tokens, an MLP cannot tell */
        const char *st = loom_intra_op_strategy(&r, g, op);
        CHECK(st && (strcmp(st, "b@0") == 0 || strcmp(st, "s@0") == 0));
        if (st && strcmp(st, "b@0") && strcmp(st, "s@0"))
            fprintf(stderr, "%s: %s\n", loom_graph_op(g, op)->name, st);
    }
    CHECK_SPEC(&r, g, "fc1", LOOM_OPERAND_WEIGHT, 0, "h f");
    CHECK_SPEC(&r, g, "fc2", LOOM_OPERAND_WEIGHT, 0, "f h");
    CHECK(r.comm_s == 0);
    loom_intra_result_free(&r);
    loom_graph_destroy(g);
}

/* A tiny model with a large batch (gradients synchronised once per 16
 * micro-batches): pure data parallelism on either axis. */
static void tiny_model_data_parallel(void)
{
    sg_llama d = {.b = 256, .s = 512, .h = 256, .heads = 4, .kvh = 4, .dh = 64, .f = 1024, .layers = 3};
    loom_graph *g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (!g) return;
    loom_mesh_shape meshes[2] = {{8, 1}, {1, 8}};
    const char *want[2] = {"b@0", "b@1"};
    for (int i = 0; i < 2; i++) {
        loom_intra_opts o;
        loom_intra_opts_init(&o);
        o.micro_batches = 16;
        loom_intra_result r;
        loom_error e;
        CHECK(loom_intra_solve(g, cm8, 2, 2, meshes[i], &o, &r, &e) == LOOM_OK);
        int32_t first, count;
        loom_graph_layer_ops(g, 2, &first, &count);
        for (int32_t op = first; op < first + count; op++) {
            const char *st = loom_intra_op_strategy(&r, g, op);
            CHECK(st && strcmp(st, want[i]) == 0);
            if (st && strcmp(st, want[i])) fprintf(stderr, "%s: %s\n", loom_graph_op(g, op)->name, st);
        }
        CHECK(r.comm_s == 0);
        CHECK(r.grad_sync_s > 0);
        loom_intra_result_free(&r);
    }
    loom_graph_destroy(g);
}

/* Two nodes of 4 GPUs as a (2, 4) mesh: axis 0 crosses nodes. With a batch
 * of 2 and the gradient sync amortised over 16 micro-batches, axis 0 only
 * ever splits the batch or the sequence (its traffic is the once-per-step
 * gradient sync, and for a sequence split the K/V ring beside attention);
 * no collective of a tensor-parallel split crosses nodes. */
static void two_nodes_keep_traffic_inside(void)
{
    sg_llama d = {.b = 2, .s = 4096, .h = 4096, .heads = 32, .kvh = 8, .dh = 128, .f = 14336, .layers = 3};
    loom_graph *g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (!g) return;
    loom_intra_opts o;
    loom_intra_opts_init(&o);
    o.micro_batches = 16;
    loom_intra_result r;
    loom_error e;
    CHECK(loom_intra_solve(g, cm4x2, 2, 2, (loom_mesh_shape){2, 4}, &o, &r, &e) == LOOM_OK);
    int32_t first, count;
    loom_graph_layer_ops(g, 2, &first, &count);
    int axis0_batch = 0;
    for (int32_t op = first; op < first + count; op++) {
        const loom_op *p = loom_graph_op(g, op);
        for (int w = 0; w < 3; w++) {
            int n = w == 0 ? p->n_in : w == 1 ? p->n_w : p->n_out;
            for (int k = 0; k < n; k++) {
                const char *s = spec_text(&r, g, op, (loom_operand)w, k);
                /* any dim on axis 0 is the batch, or the sequence: context
                 * parallelism, whose K/V ring hides behind the attention
                 * kernel (loom_ring_attention_exposed_s) */
                for (const char *q = strstr(s, "@0"); q; q = strstr(q + 1, "@0")) {
                    const char *st = q;
                    while (st > s && st[-1] != ' ') st--;
                    CHECK(q - st == 1 && (*st == 'b' || *st == 's'));
                    axis0_batch++;
                }
            }
        }
    }
    CHECK(axis0_batch > 0);
    loom_intra_result_free(&r);
    loom_graph_destroy(g);
}

/* The layer ILP (merged, pruned) against brute force and the chain DP on
 * an MLP block small enough to enumerate. */
static void layer_ilp_exact(void)
{
    loom_graph *g = sg_mlp_build(4, 8, 16, 32);
    CHECK(g != NULL);
    if (!g) return;
    loom_mesh_shape meshes[3] = {{2, 2}, {1, 4}, {4, 1}};
    for (int mi = 0; mi < 3; mi++) {
        loom_strategy_ctx c;
        loom_strategy_ctx_init(&c, g, cm8, meshes[mi], true, false);
        loom_layer_weights w = {.grad_sync_weight = 0.25, .mem_param_bytes = 1, .mem_param_count = 16,
                                .mem_act = 1};
        loom_layer_problem *p;
        loom_error e;
        CHECK(loom_layer_problem_build(&c, 0, loom_graph_num_ops(g), NULL, 0, &w, &p, &e) == LOOM_OK);
        /* the references see every choice: pruning must not lose the optimum */
        loom_layer_weights wfull = w;
        wfull.no_prune = true;
        loom_layer_problem *full;
        CHECK(loom_layer_problem_build(&c, 0, loom_graph_num_ops(g), NULL, 0, &wfull, &full, &e) == LOOM_OK);
        const loom_ilp *ilp = loom_layer_problem_ilp(p), *ref = loom_layer_problem_ilp(full);
        loom_ilp_solution gs, bs, ds;
        CHECK(loom_ilp_solve_glpk(ilp, NULL, &gs, &e) == LOOM_OK);
        CHECK(loom_ilp_solve_brute(ref, 0, 50000000, &bs, &e) == LOOM_OK);
        CHECK(loom_ilp_solve_chain_dp(ref, &ds, &e) == LOOM_OK);   /* norm -> fc1 -> fc2 */
        int64_t pruned = 1, all = 1;
        for (int32_t v = 0; v < loom_ilp_num_nodes(ilp); v++)
            pruned *= loom_ilp_node_choices(ilp, v), all *= loom_ilp_node_choices(ref, v);
        CHECK(pruned < all);
        CHECK_NEAR_REL(gs.objective, bs.objective, 1e-9);
        CHECK_NEAR_REL(ds.objective, bs.objective, 1e-12);
        {   /* GLPK on the whole transportation model, no elimination */
            loom_ilp_opts whole;
            loom_ilp_opts_init(&whole);
            whole.no_reduce = true;
            loom_ilp_solution ws;
            CHECK(loom_ilp_solve_glpk(ilp, &whole, &ws, &e) == LOOM_OK);
            CHECK_NEAR_REL(ws.objective, bs.objective, 1e-9);
            CHECK(ws.core_vars == ws.n_vars && ws.n_vars == gs.n_vars);
            loom_ilp_solution_free(&ws);
        }
        /* the evaluated totals agree with the ILP objective */
        loom_layer_totals t;
        loom_layer_problem_eval(p, gs.choice, &t);
        CHECK_NEAR_REL(t.objective_s, gs.objective, 1e-9);
        CHECK_INT_EQ(loom_layer_problem_num_sets(p), 3);   /* norm | fc1+gelu | fc2+add */
        double mem_free = t.mem_bytes, mem_min = loom_layer_problem_min_memory(p);
        loom_ilp_solution_free(&gs), loom_ilp_solution_free(&bs), loom_ilp_solution_free(&ds);
        loom_layer_problem_destroy(p);

        /* with a budget between the least memory and the free optimum's,
         * pruning keeps what the budget needs: GLPK = brute force */
        w.memory_matters = true;
        CHECK(loom_layer_problem_build(&c, 0, loom_graph_num_ops(g), NULL, 0, &w, &p, &e) == LOOM_OK);
        CHECK(mem_min < mem_free);
        loom_ilp_opts io;
        loom_ilp_opts_init(&io);
        io.memory_budget = 0.5 * (mem_min + mem_free);
        CHECK(loom_ilp_solve_glpk(loom_layer_problem_ilp(p), &io, &gs, &e) == LOOM_OK);
        CHECK(loom_ilp_solve_brute(ref, io.memory_budget, 50000000, &bs, &e) == LOOM_OK);
        CHECK_INT_EQ(gs.status, LOOM_ILP_OPTIMAL);
        CHECK_NEAR_REL(gs.objective, bs.objective, 1e-9);
        CHECK(loom_ilp_memory(loom_layer_problem_ilp(p), gs.choice) <= io.memory_budget);
        loom_ilp_solution_free(&gs), loom_ilp_solution_free(&bs);
        loom_layer_problem_destroy(p);
        loom_layer_problem_destroy(full);
    }
    loom_graph_destroy(g);
}

/* Memory budgets: infeasible below the least memory, binding in between. */
static void memory_budget(void)
{
    sg_llama d = {.b = 8, .s = 1024, .h = 2048, .heads = 16, .kvh = 16, .dh = 128, .f = 8192, .layers = 4};
    loom_graph *g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (!g) return;
    loom_intra_opts o;
    loom_intra_opts_init(&o);
    o.micro_batches = 8;
    loom_intra_result free_r, r;
    loom_error e;
    loom_mesh_shape m = {8, 1};
    CHECK(loom_intra_solve(g, cm8, 1, 4, m, &o, &free_r, &e) == LOOM_OK);
    /* data parallel keeps 16 B of state per parameter on every GPU */
    CHECK(free_r.memory_bytes_per_gpu >= 16 * free_r.param_count_per_gpu);

    o.memory_budget_bytes = 1;
    CHECK(loom_intra_solve(g, cm8, 1, 4, m, &o, &r, &e) == LOOM_OK);
    CHECK_INT_EQ(r.status, LOOM_ILP_INFEASIBLE);
    CHECK(strcmp(loom_ilp_status_name(r.status), "infeasible") == 0);
    CHECK(loom_intra_op_strategy(&r, g, sg_find(g, "L1.q_proj")) == NULL);
    loom_intra_result_free(&r);

    o.memory_budget_bytes = free_r.memory_bytes_per_gpu / 3;
    CHECK(loom_intra_solve(g, cm8, 1, 4, m, &o, &r, &e) == LOOM_OK);
    CHECK_INT_EQ(r.status, LOOM_ILP_OPTIMAL);
    CHECK(r.memory_bytes_per_gpu <= o.memory_budget_bytes);
    CHECK(r.objective_s >= free_r.objective_s * (1 - 1e-12));
    CHECK(r.param_count_per_gpu < free_r.param_count_per_gpu);   /* weights had to be split */
    loom_intra_result_free(&r);
    loom_intra_result_free(&free_r);
    loom_graph_destroy(g);
}

/* Periodic layer sharing: one layer solved with its output feeding its own
 * input costs exactly a quarter of a ring of 4 identical layers solved
 * explicitly as one ILP; the solve is done once however deep the stack. */
static void periodic_sharing(void)
{
    sg_llama d = {.b = 4, .s = 256, .h = 512, .heads = 8, .kvh = 4, .dh = 64, .f = 1024, .layers = 8};
    loom_graph *g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (!g) return;
    loom_mesh_shape m = {2, 2};
    loom_intra_opts o;
    loom_intra_opts_init(&o);
    o.micro_batches = 4;
    loom_intra_result r4, r8;
    loom_error e;
    CHECK(loom_intra_solve(g, cm8, 1, 4, m, &o, &r4, &e) == LOOM_OK);
    CHECK_INT_EQ(r4.n_solves, 1);
    CHECK_INT_EQ(r4.ops_before_merge, 15);
    CHECK(loom_intra_solve(g, cm8, 1, 8, m, &o, &r8, &e) == LOOM_OK);
    CHECK_INT_EQ(r8.n_solves, 1);
    CHECK_NEAR_REL(r8.objective_s, 2 * r4.objective_s, 1e-12);

    /* The ring: ops of layers 1..4 as one problem; layer 1 reads what layer
     * 4 produces, wired as layer 2 reads layer 1. */
    int32_t f1, n1, f2, n2;
    loom_graph_layer_ops(g, 1, &f1, &n1);
    loom_graph_layer_ops(g, 2, &f2, &n2);
    loom_periodic_link links[16];
    int nl = 0;
    for (int32_t i = 0; i < n2; i++) {
        const loom_op *op = loom_graph_op(g, f2 + i);
        for (int k = 0; k < op->n_in; k++) {
            int32_t p = loom_graph_tensor(g, op->in[k])->producer;
            if (p >= f1 && p < f1 + n1) links[nl++] = (loom_periodic_link){i, k, 3 * n1 + (p - f1), 0};
        }
    }
    CHECK_INT_EQ(nl, 2);   /* the residual stream into in_norm and attn_add */
    loom_strategy_ctx c;
    loom_strategy_ctx_init(&c, g, cm8, m, true, false);
    loom_layer_weights w = {.grad_sync_weight = 0.25, .mem_param_bytes = 1, .mem_param_count = 16,
                            .mem_act = 1};
    loom_layer_problem *p;
    CHECK(loom_layer_problem_build(&c, f1, 4 * n1, links, nl, &w, &p, &e) == LOOM_OK);
    loom_ilp_solution s;
    CHECK(loom_ilp_solve_glpk(loom_layer_problem_ilp(p), NULL, &s, &e) == LOOM_OK);
    CHECK_INT_EQ(s.status, LOOM_ILP_OPTIMAL);
    CHECK_NEAR_REL(s.objective, r4.objective_s, 1e-9);
    /* The plain stack (layer 1's input free, as after a pipeline boundary)
     * can only be cheaper than the ring: its optimum with the boundary
     * resharded (at most gathering the [b, s, h] input over the whole mesh
     * forward and scattering its gradient back) is a ring assignment. */
    loom_layer_problem *stack;
    loom_ilp_solution ss;
    CHECK(loom_layer_problem_build(&c, f1, 4 * n1, NULL, 0, &w, &stack, &e) == LOOM_OK);
    CHECK(loom_ilp_solve_glpk(loom_layer_problem_ilp(stack), NULL, &ss, &e) == LOOM_OK);
    CHECK(ss.objective <= s.objective * (1 + 1e-12));
    double Bx = (double)(d.b * d.s * d.h * 2), boundary = 0;
    for (int a = 0; a < 2; a++)
        boundary += coll(cm8, LOOM_COLL_ALL_GATHER, m, a, Bx) +
                    coll(cm8, LOOM_COLL_REDUCE_SCATTER, m, a, Bx);
    CHECK(s.objective - ss.objective <= boundary);
    printf("periodic layer: %.6f ms x 4 = ring of 4: %.6f ms, stack of 4: %.6f ms\n",
           r4.objective_s / 4 * 1e3, s.objective * 1e3, ss.objective * 1e3);
    loom_ilp_solution_free(&ss);
    loom_layer_problem_destroy(stack);
    loom_ilp_solution_free(&s);
    loom_layer_problem_destroy(p);
    loom_intra_result_free(&r4);
    loom_intra_result_free(&r8);
    loom_graph_destroy(g);
}

/* The cache: a second call answers from it; ranges share the layer solve;
 * a different mesh is a different solve. */
static void cache_and_ranges(void)
{
    sg_llama d = {.b = 4, .s = 256, .h = 512, .heads = 8, .kvh = 8, .dh = 64, .f = 1024, .layers = 6};
    loom_graph *g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (!g) return;
    loom_intra_cache *cache;
    loom_error e;
    CHECK(loom_intra_cache_create(&cache, &e) == LOOM_OK);
    loom_intra_opts o;
    loom_intra_opts_init(&o);
    o.cache = cache;
    loom_intra_result a, b, c0;
    CHECK(loom_intra_solve(g, cm8, 0, 6, (loom_mesh_shape){1, 4}, &o, &a, &e) == LOOM_OK);
    CHECK_INT_EQ(a.n_solves, 2);   /* layer 0 and the block */
    CHECK(loom_intra_solve(g, cm8, 2, 5, (loom_mesh_shape){1, 4}, &o, &b, &e) == LOOM_OK);
    CHECK_INT_EQ(b.n_solves, 0);
    CHECK_INT_EQ(b.n_cache_hits, 4);
    CHECK(b.solve_time_s == 0);
    /* additive: 4 blocks of the 6 */
    loom_intra_result one;
    CHECK(loom_intra_solve(g, cm8, 3, 3, (loom_mesh_shape){1, 4}, &o, &one, &e) == LOOM_OK);
    CHECK_NEAR_REL(b.time_s, 4 * one.time_s, 1e-12);
    /* the whole range = layer 0 + 6 blocks + the boundary between them */
    loom_intra_result l0;
    CHECK(loom_intra_solve(g, cm8, 0, 0, (loom_mesh_shape){1, 4}, &o, &l0, &e) == LOOM_OK);
    CHECK(a.time_s >= l0.time_s + 6 * one.time_s - 1e-15);
    CHECK(loom_intra_solve(g, cm8, 2, 5, (loom_mesh_shape){2, 2}, &o, &c0, &e) == LOOM_OK);
    CHECK_INT_EQ(c0.n_solves, 1);
    int64_t solves, hits;
    loom_intra_cache_stats(cache, &solves, &hits);
    CHECK_INT_EQ(solves, 3);
    CHECK(hits >= 4 + 1 + 1);
    /* accessors: inside and outside the range */
    int32_t q = sg_find(g, "L3.q_proj"), q0 = sg_find(g, "L1.q_proj");
    CHECK(loom_intra_op_strategy(&b, g, q) != NULL);
    CHECK(loom_intra_op_strategy(&b, g, q0) == NULL);
    CHECK(spec_text(&b, g, q, LOOM_OPERAND_WEIGHT, 1) == NULL);
    loom_intra_op_cost oc;
    CHECK(loom_intra_op_cost_get(&b, g, q, &oc) && oc.compute_s > 0);
    CHECK(!loom_intra_op_cost_get(&b, g, q0, &oc));
    loom_intra_result_free(&a), loom_intra_result_free(&b), loom_intra_result_free(&c0);
    loom_intra_result_free(&one), loom_intra_result_free(&l0);
    loom_graph_destroy(g);

    /* A graph rebuilt with another batch (often at the same address, with
     * the same op and tensor counts) must not reuse the first one's
     * solutions: the cached answer equals a fresh one. */
    d.b = 16;
    g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (g) {
        loom_intra_result cached, fresh;
        CHECK(loom_intra_solve(g, cm8, 2, 5, (loom_mesh_shape){1, 4}, &o, &cached, &e) == LOOM_OK);
        CHECK_INT_EQ(cached.n_solves, 1);
        loom_intra_opts plain = o;
        plain.cache = NULL;
        CHECK(loom_intra_solve(g, cm8, 2, 5, (loom_mesh_shape){1, 4}, &plain, &fresh, &e) == LOOM_OK);
        CHECK_NEAR_REL(cached.objective_s, fresh.objective_s, 1e-12);
        loom_intra_result_free(&cached), loom_intra_result_free(&fresh);
        loom_graph_destroy(g);
    }
    loom_intra_cache_destroy(cache);
    loom_intra_cache_destroy(NULL);
}

static void bad_arguments(void)
{
    sg_llama d = {.b = 1, .s = 64, .h = 64, .heads = 4, .kvh = 4, .dh = 16, .f = 128, .layers = 1};
    loom_graph *g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (!g) return;
    loom_intra_result r;
    loom_error e;
    CHECK(loom_intra_solve(g, cm8, 1, 5, (loom_mesh_shape){1, 8}, NULL, &r, &e) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "layer range [1, 5]");
    CHECK(loom_intra_solve(g, cm8, 0, 1, (loom_mesh_shape){0, 8}, NULL, &r, &e) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "mesh 0x8");
    CHECK(loom_intra_solve(g, NULL, 0, 1, (loom_mesh_shape){1, 8}, NULL, &r, &e) == LOOM_ERR_INVALID);
    loom_intra_result_free(&r);
    loom_graph_destroy(g);
}

int main(void)
{
    loom_error e;
    CHECK(loom_cluster_load("dgx-h100-x1", &cl8, &e) == LOOM_OK);
    CHECK(loom_cluster_load("dgx-h100-x2", &cl4x2, &e) == LOOM_OK);
    cl4x2.gpus_per_node = 4;
    CHECK(loom_cost_model_create(&cl8, NULL, NULL, &cm8, &e) == LOOM_OK);
    CHECK(loom_cost_model_create(&cl4x2, NULL, NULL, &cm4x2, &e) == LOOM_OK);
    llama_8b_tensor_parallel();
    mlp_block();
    tiny_model_data_parallel();
    two_nodes_keep_traffic_inside();
    layer_ilp_exact();
    memory_budget();
    periodic_sharing();
    cache_and_ranges();
    bad_arguments();
    loom_cost_model_destroy(cm8);
    loom_cost_model_destroy(cm4x2);
    return check_done();
}
