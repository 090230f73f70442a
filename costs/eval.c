/*
 * eval.c — one Megatron-style configuration, end to end (eval.h).
 *
 * What does a training step of a given (tp, pp, dp, cp, ep, mbs, gbs,
 * sp, recompute, zero, vpp) configuration cost on a cluster? The graph holds
 * one micro-batch's forward ops; everything else is derived here.
 *
 * Placement. Megatron orders ranks tp-cp-ep-dp-pp, tensor parallel fastest:
 * a TP group is tp consecutive GPUs (inside a node when tp <= GPUs per node),
 * the context-parallel group strides by tp, the data-parallel group (which
 * also spans cp, for the weights) strides by tp, and pipeline neighbours
 * are tp·cp·dp apart. Expert layers have their own rank generator
 * (Megatron-Core's MoE parallel folding: the order etp-ep-edp over the same
 * tp·cp·dp ranks of a stage): the expert-parallel group strides by the
 * expert TP degree etp (tp unless --etp), the expert data-parallel group of
 * tp·cp·dp / (etp·ep) ranks by etp·ep; with etp < tp an expert-parallel
 * group spans tensor-parallel ranks. Each group's collectives use the
 * intra- or inter-node link accordingly (loom_group_collective_time_s); a
 * pattern that does not tile the nodes is priced as its slowest group
 * (loom_strided_group: TP 16 on 72-GPU racks straddles GPUs 64-79). A
 * configuration of nodes × tile GPUs on a cluster whose nodes have a
 * power-of-two tile (GB200 NVL72: 64 of 72, costs/cluster.h) runs on the
 * tile view: ranks in order on the first 64 GPUs of each rack.
 *
 * Stages. The L transformer blocks are split evenly over pp ranks (or
 * first/last stage sizes as given); with v virtual stages into pp·v chunks,
 * rank r holding chunks r, r+pp, …; the embedding goes with the first chunk,
 * the head and loss with the last.
 *
 * Compute per op (loom_cost_op_time on the op's shard). An op that touches
 * a tensor-parallel dim (heads, kvh, f, v) has those dims split tp ways (kv
 * heads min(tp, kvh) ways: fewer kv heads than tp are replicated); experts'
 * f by the expert-TP degree. An op with no TP dim runs on the whole
 * sequence, or on s/tp under sequence parallelism. Context parallelism
 * splits s cp ways, except in attention: ring attention with Megatron's
 * load-balanced chunks gives every rank 1/cp of the (causal) work against
 * keys it receives around the ring, so attention is timed whole and divided
 * by cp. Expert ops are not split by ep: a GPU owns e/ep experts but each
 * receives ep ranks' tokens, the same FLOPs as all experts on its own tokens.
 * The router and the token dispatcher (dispatch, combine) work on a rank's
 * own sequence-parallel tokens, as Megatron's alltoall dispatcher does: the
 * permuted buffers are all-gathered over the TP group before the expert
 * GEMMs and reduce-scattered after them (their f / g operators, below).
 * A dim a split does not divide (GPT-2's vocabulary of 50257 over tp 8;
 * Megatron pads it) is timed whole and divided by the parts.
 *
 * Tensor-parallel communication follows Megatron's f / g operators, found
 * from the dims: an op whose inputs carry a TP dim that its output lacks
 * (attention and MLP output projections, the vocab-parallel embedding)
 * leaves partial sums: all-reduce forward (reduce-scatter with SP, whose
 * backward is an all-gather); an op whose weight and output carry a TP dim
 * but whose input does not (QKV and fc1/gate/up, once per shared input)
 * needs the input gradient all-reduced backward (with SP: all-gather
 * forward, reduce-scatter backward). For a GPT layer: 2 all-reduces forward
 * and 2 backward (Shoeybi et al. 2019, Fig. 4); the vocab-parallel loss adds
 * three small all-reduces over [b, s]. With --tp-comm-overlap each
 * collective hides behind the GEMM it feeds or drains and only the excess
 * is exposed. Context parallelism passes each attention's K and V around
 * the ring (cp-1 steps forward, twice that backward), overlapped with the
 * attention kernels; expert parallelism pays Megatron's alltoall dispatcher
 * (costs/moe.h: the token counts gathered, the tokens and their routing
 * probabilities all-to-all and back, forward and backward, the busiest
 * rank's share), exposed as Megatron runs it by default (with the HybridEP
 * dispatcher, moe_hybridep, its all-to-alls pay one latency per link level
 * and a token crosses to another node once, forwarded there over NVLink:
 * collective.h loom_group_all_to_all_split_s, moe.h
 * loom_moe_remote_domain_copies); with
 * --overlap-moe-expert-parallel-comm (moe_a2a_overlap) each MoE layer's
 * paired passes take costs/moe_overlap.h's pair time instead of the sum of
 * its phases. The dispatcher's
 * permutation kernels, the router's and the busiest rank's expert work are
 * the op times of loom_cost_op_time_ep (compute.h).
 *
 * Recompute. Full recompute reruns each block's forward (with its TP
 * communication) during the backward (only the first recompute_layers
 * blocks of each of a rank's chunks when that is set: Megatron's block
 * method runs per TransformerBlock, one per virtual chunk); selective reruns
 * the ops of the modules it names (recompute.h: by default Megatron's
 * core_attn, the ops touching s×t tensors or the fused attention kernel),
 * with their collectives (a recomputed MoE layer's all-to-alls too).
 * torchtitan's selective recompute keeps its fused attention (SDPA is in
 * its save list); its op-level policy reruns every second weight GEMM of a
 * block (plain_mm) and,
 * with eager element-wise ops (compute.h), the block's norms, rotary
 * embeddings, activations and residual adds (eager_rerun).
 *
 * CPU activation offloading (Megatron's --cpu-offloading-num-layers, pp 1)
 * copies each offloaded block's saved tensors to the host after its forward
 * and back before its backward, over the GPU's host link (device.h
 * host_Bps), beside the neighbouring block's compute: only what a copy
 * takes beyond that block's own pass is exposed (breakdown offload_s).
 *
 * Step (costs/pipeline.h). Per-rank micro-batch times t_i go into the 1F1B
 * formula with M = gbs / (mbs·dp) micro-batches; p2p transfers are the
 * hidden state [mbs, s/cp, h] / tp (Megatron's scatter-gather), over the
 * inter-node link when the pipeline spans nodes (its slowest boundary),
 * all exposed with 1F1B and only the fill and drain's with Megatron's
 * interleaved schedule, which overlaps the rest (pipeline.c); the
 * data-parallel sync is an all-reduce of fp32 gradients (Megatron reduces
 * bf16 runs' gradients in fp32 unless --grad-reduce-in-bf16), or reduce-scatter + all-gather of bf16
 * weights with a sharded optimizer, or per-micro-batch gathers with ZeRO-3;
 * with --overlap-grad-reduce it hides behind the last micro-batch's
 * backward (and the next first forward for the weight all-gather), up to
 * the calibrated grad_sync_overlap; the optimizer streams
 * LOOM_OPTIM_STEP_BYTES_PER_PARAM per local parameter through HBM.
 *
 * FLOPs. Model FLOPs = 3 × forward matmul/attention FLOPs of the graph
 * (full attention, Korthikanti et al. Eq. 7); hardware FLOPs add the
 * recomputed forward matmuls (their HFU); MFU = model FLOPs / (step ·
 * GPUs · dense peak of the dtype).
 *
 * Units: seconds, FLOPs, bytes.
 */
#include "costs/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/collective.h"
#include "costs/dp_sync.h"
#include "costs/moe.h"
#include "costs/moe_overlap.h"
#include "costs/pipeline.h"
#include "costs/recompute.h"

/* Megatron's tensor-parallel dims (split by tp); "qkv" (GPT-2's fused
 * projection, size 3) travels with "heads" and is never split itself. */
static const char *const tp_dims[] = {"heads", "kvh", "f", "v"};

typedef struct {
    const loom_graph *g;
    const loom_cost_model *cm;
    const loom_cluster *c;
    const loom_calib *cal;
    const loom_parallel *p;
    loom_group tp, etp, cp, ep, dp, edp;
    int32_t *col_seen;   /* [tensors]: layer + 1 that already paid a column-parallel input */
} ctx;

/* One layer's costs per micro-batch on one GPU. */
typedef struct {
    double fwd_s, bwd_s;           /* compute */
    double comm_fwd_s, comm_bwd_s; /* exposed TP / CP / EP communication */
    double recompute_s;            /* forward rerun in the backward, if recomputed */
    double recompute_comm_s;       /* its communication part */
    double model_flops;            /* 3 × forward matmul FLOPs (whole layer, unsharded) */
    double attn_flops;             /* forward attention-score FLOPs */
    double recompute_flops;        /* forward matmul FLOPs rerun */
    double measured_s, total_s;    /* profile-db share of fwd+bwd */
    loom_eval_work_time work[LOOM_WORK_COUNT];   /* fwd_s, bwd_s, recompute_s by kind */
    bool moe;                      /* has a token dispatcher: the a2a overlap's phases below */
    loom_moe_phases ph_fwd, ph_bwd;/* compute + exposed comm (+ recompute in bwd) by phase */
} layer_cost;

static bool has_dim(const loom_tensor *t, const char *name)
{
    return loom_tensor_dim_index(t, name) >= 0;
}

static bool has_tp_dim(const loom_tensor *t)
{
    for (size_t k = 0; k < sizeof tp_dims / sizeof tp_dims[0]; k++)
        if (has_dim(t, tp_dims[k])) return true;
    return false;
}

static bool has_seq_dim(const loom_tensor *t)
{
    return has_dim(t, "s") || has_dim(t, "t") || has_dim(t, "c");
}

/* The op's operands: inputs, weights, outputs. */
static int operands(const loom_op *op, int32_t *ids)
{
    int n = 0;
    for (int i = 0; i < op->n_in; i++) ids[n++] = op->in[i];
    for (int i = 0; i < op->n_w; i++) ids[n++] = op->w[i];
    for (int i = 0; i < op->n_out; i++) ids[n++] = op->out[i];
    return n;
}

static double coll(const ctx *x, loom_collective k, loom_group grp, double bytes)
{
    return loom_group_collective_time_s(x->c, x->cal, k, grp, bytes);
}

/* Bytes of a whole tensor on one GPU of a TP group (its sequence divided by
 * cp; expert tokens by the tp/etp groups that run them): the buffer a TP
 * collective moves. */
static double comm_bytes(const ctx *x, const loom_tensor *t)
{
    const loom_parallel *p = x->p;
    double b = (double)loom_tensor_bytes(t);
    int64_t etp = p->etp > 0 ? p->etp : p->tp;
    if (has_dim(t, "e") && has_dim(t, "c") && p->tp > etp && p->tp % etp == 0)
        b /= (double)(p->tp / etp);
    return has_seq_dim(t) ? b / (double)p->cp : b;
}

/* What a collective of comm_s running beside a GEMM of gemm_s adds. */
static double beside(double comm_s, double gemm_s)
{
    return comm_s > gemm_s ? comm_s - gemm_s : 0;
}

/* A collective on the critical path: hidden behind its GEMM only with
 * --tp-comm-overlap (userbuffers split both into chunks and pipeline them). */
static double exposed(const ctx *x, double comm_s, double gemm_s)
{
    return x->p->tp_comm_overlap ? beside(comm_s, gemm_s) : comm_s;
}

/* Splits of op's dims under p; `divisor` collects parts of splits that do
 * not divide a dim (the op is then timed whole and divided). */
static int op_splits(const ctx *x, const loom_op *op, loom_dim_split *sp, double *divisor)
{
    const loom_parallel *p = x->p;
    int32_t ids[3 * LOOM_MAX_IO];
    int n_ids = operands(op, ids);
    bool tp_op = false, expert = false;
    int64_t kvh = 0;
    for (int k = 0; k < n_ids; k++) {
        const loom_tensor *t = loom_graph_tensor(x->g, ids[k]);
        tp_op |= has_tp_dim(t);
        expert |= loom_memory_is_expert_tensor(t);
        int d = loom_tensor_dim_index(t, "kvh");
        if (d >= 0) kvh = t->dims[d].size;
    }
    int64_t tpd = expert && p->etp > 0 ? p->etp : p->tp;
    loom_dim_split want[8];
    int n = 0;
    if (tpd > 1) {
        want[n++] = (loom_dim_split){"heads", tpd};
        want[n++] = (loom_dim_split){"f", tpd};
        want[n++] = (loom_dim_split){"v", tpd};
        if (kvh > 0) want[n++] = (loom_dim_split){"kvh", kvh < tpd ? kvh : tpd};
    }
    int64_t seq = (tp_op || !p->sp ? 1 : p->tp) * p->cp;
    /* expert tokens: each etp-group of a TP group runs its own (memory.c) */
    int64_t tok = (expert && p->tp > tpd && p->tp % tpd == 0 ? p->tp / tpd : 1) * p->cp;
    /* the token dispatcher permutes (and un-permutes) a rank's own
     * sequence-parallel tokens; the expert buffers are gathered after it */
    bool dispatcher = op->kind == LOOM_OP_MOE_DISPATCH || op->kind == LOOM_OP_MOE_COMBINE;
    if (expert && !dispatcher) seq = tok;
    if (op->kind != LOOM_OP_ATTENTION && seq > 1) {
        want[n++] = (loom_dim_split){"s", seq};
        want[n++] = (loom_dim_split){"c", seq};
    }
    int out = 0;
    *divisor = 1;
    for (int i = 0; i < n; i++) {
        bool present = false, divides = true;
        for (int k = 0; k < n_ids; k++) {
            const loom_tensor *t = loom_graph_tensor(x->g, ids[k]);
            int d = loom_tensor_dim_index(t, want[i].dim);
            if (d < 0) continue;
            present = true;
            divides &= t->dims[d].size % want[i].parts == 0;
        }
        if (!present) continue;
        if (divides) sp[out++] = want[i];
        else *divisor *= (double)want[i].parts;
    }
    if (op->kind == LOOM_OP_ATTENTION) *divisor *= (double)p->cp;
    return out;
}

/* Tensor-parallel, context-parallel and expert-parallel communication of
 * one op (exposed; forward and backward). */
static void op_comm(const ctx *x, const loom_op *op, const loom_op_time *t, double *fwd,
                    double *bwd)
{
    const loom_parallel *p = x->p;
    const loom_graph *g = x->g;
    *fwd = *bwd = 0;
    const loom_tensor *out0 = loom_graph_tensor(g, op->out[0]);
    bool expert = loom_memory_is_expert_tensor(out0) ||
                  (op->n_in && loom_memory_is_expert_tensor(loom_graph_tensor(g, op->in[0])));
    int64_t tpd = expert && p->etp > 0 ? p->etp : p->tp;
    loom_group tpg = expert && p->etp > 0 ? x->etp : x->tp;

    if (tpd > 1 && (op->kind == LOOM_OP_EINSUM || op->kind == LOOM_OP_EMBEDDING)) {
        bool in_tp = false, w_tp = false;
        for (int i = 0; i < op->n_in; i++) in_tp |= has_tp_dim(loom_graph_tensor(g, op->in[i]));
        for (int i = 0; i < op->n_w; i++) w_tp |= has_tp_dim(loom_graph_tensor(g, op->w[i]));
        bool out_tp = has_tp_dim(out0);
        /* backward = dgrad GEMM + wgrad GEMM, about half each */
        double half_bwd = t->bwd_s / 2;
        if ((in_tp || w_tp) && !out_tp) {
            /* g: partial sums out of a row-parallel op; with SP the output
             * gradient is all-gathered before the dgrad GEMM */
            double b = comm_bytes(x, out0);
            *fwd += exposed(x, coll(x, p->sp ? LOOM_COLL_REDUCE_SCATTER : LOOM_COLL_ALL_REDUCE,
                                    tpg, b), t->fwd_s);
            if (p->sp) *bwd += exposed(x, coll(x, LOOM_COLL_ALL_GATHER, tpg, b), half_bwd);
        } else if (w_tp && out_tp) {
            /* f: replicated input into a column-parallel op, paid once per
             * input tensor in the layer (q/k/v, gate/up share it). Backward:
             * the input gradient's all-reduce (SP: reduce-scatter) runs
             * asynchronously beside the wgrad GEMM; with SP the input is
             * first all-gathered again for that wgrad, beside the dgrad GEMM
             * (Megatron's LinearWithGradAccumulationAndAsyncCommunication;
             * Korthikanti et al. §4.2.2). */
            for (int i = 0; i < op->n_in; i++) {
                const loom_tensor *in = loom_graph_tensor(g, op->in[i]);
                if (has_tp_dim(in) || x->col_seen[op->in[i]] == op->layer + 1) continue;
                x->col_seen[op->in[i]] = op->layer + 1;
                double b = comm_bytes(x, in);
                if (p->sp) {
                    *fwd += exposed(x, coll(x, LOOM_COLL_ALL_GATHER, tpg, b), t->fwd_s);
                    *bwd += beside(coll(x, LOOM_COLL_ALL_GATHER, tpg, b), half_bwd);
                }
                *bwd += beside(coll(x, p->sp ? LOOM_COLL_REDUCE_SCATTER : LOOM_COLL_ALL_REDUCE,
                                    tpg, b), half_bwd);
            }
        }
    }
    if (tpd > 1 && op->kind == LOOM_OP_CROSS_ENTROPY) {
        /* vocab-parallel loss: max, sum of exp and target logit over tp,
         * fp32 per token */
        const loom_tensor *lg = loom_graph_tensor(g, op->in[0]);
        int d = loom_tensor_dim_index(lg, "v");
        if (d >= 0) {
            double tokens = (double)loom_tensor_numel(lg) / (double)lg->dims[d].size;
            *fwd += 3 * coll(x, LOOM_COLL_ALL_REDUCE, tpg, 4 * tokens / (double)p->cp);
        }
    }
    if (p->cp > 1 && op->kind == LOOM_OP_ATTENTION) {
        /* ring attention: K and V shards go round the cp ring, overlapped
         * with the attention blocks */
        loom_parallel local = *p;
        local.sp = false;
        double kv = (double)(loom_memory_tensor_shard_bytes(loom_graph_tensor(g, op->in[1]), &local, false) +
                             loom_memory_tensor_shard_bytes(loom_graph_tensor(g, op->in[2]), &local, false));
        double rf, rb;
        loom_ring_attention_exposed_s(x->c, x->cal, x->cp, kv, t->fwd_s, t->bwd_s, &rf, &rb);
        *fwd += rf;
        *bwd += rb;
    }
    if (p->ep > 1 && (op->kind == LOOM_OP_MOE_DISPATCH || op->kind == LOOM_OP_MOE_COMBINE)) {
        bool dispatch = op->kind == LOOM_OP_MOE_DISPATCH;
        const loom_tensor *tok = loom_graph_tensor(g, dispatch ? op->in[0] : op->out[0]);
        const loom_tensor *buf = loom_graph_tensor(g, dispatch ? op->out[0] : op->in[0]);
        int de = loom_tensor_dim_index(buf, "e");
        int64_t experts = de >= 0 ? buf->dims[de].size : 0;
        /* each rank dispatches its own (sequence-parallel) tokens */
        double row = (double)loom_dtype_bytes(tok->dtype) * (double)tok->dims[tok->ndim - 1].size;
        double tokens = (double)loom_tensor_bytes(tok) / row / (double)(p->tp * p->cp);
        loom_moe_side side = {.tokens = tokens, .row_bytes = row, .topk = op->topk,
                              .local_experts = experts / p->ep, .ep = p->ep,
                              .load_factor = loom_moe_max_load_factor(experts, op->topk, p->ep,
                                                                      tokens * (double)p->ep)};
        loom_moe_comm ops[LOOM_MOE_MAX_COMM];
        int n = loom_moe_comm_ops(&side, dispatch, experts, ops);
        /* HybridEP: one kernel writes every peer (one latency per link
         * level), and a token crosses to another node once, forwarded there
         * over NVLink (moe.h loom_moe_remote_domain_copies); every copy but
         * those landing on the GPU that holds or receives it rides NVLink */
        int64_t per = x->ep.ranks_per_node < 1 ? 1 : x->ep.ranks_per_node;
        if (per > x->ep.ranks) per = x->ep.ranks;
        double in_share = (double)(per - 1) / (double)per, out_share = 0;
        if (p->moe_hybridep)   /* per dispatched row: copies across over the k rows of a token */
            out_share = loom_moe_remote_domain_copies(experts, op->topk, p->ep, per) /
                        (double)(op->topk > 0 ? op->topk : 1);
        for (int i = 0; i < n; i++)
            *(ops[i].backward ? bwd : fwd) +=
                p->moe_hybridep && ops[i].kind == LOOM_COLL_ALL_TO_ALL
                    ? loom_group_all_to_all_split_s(x->c, x->cal, x->ep, ops[i].bytes * in_share,
                                                    ops[i].bytes * out_share)
                    : coll(x, ops[i].kind, x->ep, ops[i].bytes);
    }
}

/* A dense weight GEMM, aten.mm in PyTorch (not an expert's grouped GEMM,
 * whose input is already per expert). torchtitan's op-level selective
 * checkpointing (models/llama3/parallelize_llama.py, _apply_ac_to_
 * transformer_block with selective_ac_option "op") saves the outputs of
 * mm, SDPA, reduce-scatter and max, "except every second mm": counted per
 * block in forward order, the 2nd, 4th, 6th … rerun in the backward (for a
 * Llama block wq wk wv wo w1 w3 w2: wk, wo and w3, about 36% of its GEMM
 * FLOPs), and so do the cheap ops around them. */
static bool plain_mm(const loom_graph *g, const loom_op *op)
{
    if (op->kind != LOOM_OP_EINSUM || op->n_w < 1 || op->n_in < 1) return false;
    return !(has_dim(loom_graph_tensor(g, op->w[0]), "e") &&
             has_dim(loom_graph_tensor(g, op->in[0]), "e"));
}

/* An element-wise op that torchtitan's op-level selective checkpointing
 * reruns as it ran forward: its policy saves only mm, SDPA, reduce-scatter
 * and max outputs, so the norms, rotary embeddings, activations and
 * residual adds of a block are recomputed in the backward. Eager PyTorch
 * reruns their kernels (eager.h); under torch.compile the partitioner folds
 * a recomputed element-wise op into the backward kernel that reads it
 * (min-cut rematerialisation), which costs no pass of its own. */
static bool eager_rerun(const ctx *x, const loom_op *op)
{
    if (loom_cost_model_elementwise(x->cm) != LOOM_ELEMENTWISE_EAGER) return false;
    return op->kind == LOOM_OP_ELEMENTWISE || op->kind == LOOM_OP_NORM;
}

static const struct {
    const char *key, *label;
} work_names[] = {
#define LOOM_X(n, key, label) {key, label},
    LOOM_EVAL_WORK_LIST(LOOM_X)
#undef LOOM_X
};

const char *loom_eval_work_key(loom_eval_work k)
{
    return (unsigned)k < LOOM_WORK_COUNT ? work_names[k].key : "?";
}

const char *loom_eval_work_label(loom_eval_work k)
{
    return (unsigned)k < LOOM_WORK_COUNT ? work_names[k].label : "?";
}

/* The kind of work op i is (eval.h). */
static loom_eval_work work_kind(const loom_graph *g, int32_t i)
{
    const loom_op *op = loom_graph_op(g, i);
    if (loom_recompute_core_attn_op(g, i)) return LOOM_WORK_ATTENTION;
    switch (op->kind) {
    case LOOM_OP_EINSUM: return plain_mm(g, op) ? LOOM_WORK_GEMM : LOOM_WORK_EXPERT_GEMM;
    case LOOM_OP_NORM: return LOOM_WORK_NORM;
    case LOOM_OP_MOE_ROUTE:
    case LOOM_OP_MOE_DISPATCH:
    case LOOM_OP_MOE_COMBINE: return LOOM_WORK_MOE_ROUTING;
    case LOOM_OP_EMBEDDING:
    case LOOM_OP_CROSS_ENTROPY: return LOOM_WORK_EMBEDDING_LOSS;
    default: return LOOM_WORK_ELEMENTWISE;
    }
}

/* Costs of layer l, one micro-batch. */
static loom_status layer_costs(const ctx *x, int32_t l, layer_cost *lc, loom_error *err)
{
    const loom_parallel *p = x->p;
    bool block = loom_memory_is_block(x->g, l);
    int32_t first, count;
    loom_graph_layer_ops(x->g, l, &first, &count);
    /* the a2a overlap's phases (moe_overlap.h), by an op's place around the
     * dispatcher: before and at the dispatch (its permute) the pre phase,
     * the dispatch's collectives its own, then the experts, and from the
     * combine on (its collectives, unpermute, residual) the combine phase */
    int phase = 0, mm = 0;
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *op = loom_graph_op(x->g, i);
        loom_dim_split sp[8];
        double div;
        int n = op_splits(x, op, sp, &div);
        loom_op_time t;
        loom_status s = loom_cost_op_time_ep(x->cm, x->g, i, sp, n, p->ep, &t, err);
        if (s) return s;
        t.fwd_s /= div;
        t.bwd_s /= div;
        double cf, cb;
        op_comm(x, op, &t, &cf, &cb);
        if (op->kind == LOOM_OP_MOE_COMBINE) phase = 3;
        double *pf = phase == 0 ? &lc->ph_fwd.pre_s : phase == 2 ? &lc->ph_fwd.mlp_s
                                                                 : &lc->ph_fwd.combine_s;
        double *pb = phase == 0 ? &lc->ph_bwd.pre_s : phase == 2 ? &lc->ph_bwd.mlp_s
                                                                 : &lc->ph_bwd.combine_s;
        *pf += t.fwd_s;
        *pb += t.bwd_s;
        if (op->kind == LOOM_OP_MOE_DISPATCH) {
            lc->moe = true;
            lc->ph_fwd.dispatch_s += cf, lc->ph_bwd.dispatch_s += cb;
            phase = 2;
        } else {
            *pf += cf;
            *pb += cb;
        }
        lc->fwd_s += t.fwd_s;
        lc->bwd_s += t.bwd_s;
        lc->comm_fwd_s += cf;
        lc->comm_bwd_s += cb;
        loom_eval_work_time *wk = &lc->work[work_kind(x->g, i)], *wc = &lc->work[LOOM_WORK_COMM];
        wk->fwd_s += t.fwd_s, wk->bwd_s += t.bwd_s;
        wc->fwd_s += cf, wc->bwd_s += cb;
        lc->total_s += t.fwd_s + t.bwd_s;
        if (t.source != LOOM_SRC_ROOFLINE) lc->measured_s += t.fwd_s + t.bwd_s;

        bool matmul = op->kind == LOOM_OP_EINSUM || op->kind == LOOM_OP_ATTENTION;
        mm += plain_mm(x->g, op);
        bool op_sac = p->recompute == LOOM_RECOMPUTE_SELECTIVE && block &&
                      p->framework == LOOM_FRAMEWORK_TORCHTITAN;
        bool rerun = (p->recompute == LOOM_RECOMPUTE_FULL && block) ||
                     loom_recompute_op_reruns(x->g, p, i) ||
                     (op_sac && plain_mm(x->g, op) && mm % 2 == 0) ||
                     (op_sac && eager_rerun(x, op));
        if (rerun) {
            lc->recompute_s += t.fwd_s + cf;
            lc->recompute_comm_s += cf;
            wk->rerun_s += t.fwd_s, wc->rerun_s += cf;
            /* rerun in the backward of its phase (the dispatch's
             * all-to-alls in the dispatch's, as it ran forward) */
            *pb += t.fwd_s;
            if (op->kind == LOOM_OP_MOE_DISPATCH) lc->ph_bwd.dispatch_s += cf;
            else *pb += cf;
            if (matmul) lc->recompute_flops += (double)op->fwd_flops;
        }
        if (matmul) lc->model_flops += 3.0 * (double)op->fwd_flops;
        if (matmul && loom_recompute_core_attn_op(x->g, i)) lc->attn_flops += (double)op->fwd_flops;
    }
    return LOOM_OK;
}

/* ---- placement ------------------------------------------------------------- */

/* Pipeline rank of every graph layer. Blocks are numbered 0..L-1 in order;
 * with a layout (o->n_chunks > 0, checked by check_layout) block b sits in
 * the chunk whose running total first exceeds b, on rank chunk mod pp. */
static void assign_ranks(const loom_graph *g, const loom_parallel *p, const loom_eval_opts *o,
                         int32_t *rank)
{
    int32_t n = loom_graph_layer_count(g);
    int64_t L = 0;
    for (int32_t l = 0; l < n; l++) L += loom_memory_is_block(g, l);
    int64_t b = 0, pp = p->pp;
    for (int32_t l = 0; l < n; l++) {
        if (!loom_memory_is_block(g, l)) {
            rank[l] = b == 0 ? 0 : (int32_t)(pp - 1);   /* embedding first, head last */
            continue;
        }
        int64_t r;
        if (o && o->n_chunks > 0) {
            int64_t c = 0, end = o->chunk_layers[0];
            while (b >= end && c + 1 < o->n_chunks) end += o->chunk_layers[++c];
            r = c % pp;
        } else if (p->vpp > 1) {
            int64_t chunk = L / (pp * p->vpp);
            r = (b / chunk) % pp;
        } else if (p->first_stage_layers > 0 || p->last_stage_layers > 0) {
            int64_t f = p->first_stage_layers, e = p->last_stage_layers;
            int64_t mid_ranks = pp - (f > 0) - (e > 0);
            int64_t mid = mid_ranks > 0 ? (L - f - e) / mid_ranks : 0;
            if (f > 0 && b < f) r = 0;
            else if (e > 0 && b >= L - e) r = pp - 1;
            else r = (f > 0) + (b - f) / (mid > 0 ? mid : 1);
        } else {
            r = b / (L / pp);
        }
        rank[l] = (int32_t)r;
        b++;
    }
}

/* Data-parallel synchronisation of n parameters over group grp per step
 * (dp_sync.h: the collectives of p's ZeRO stage). */
static loom_dp_sync_in sync_in(const ctx *x, double n, loom_group grp, int64_t m, int64_t blocks)
{
    const loom_parallel *p = x->p;
    return (loom_dp_sync_in){.params = n, .zero = p->dist_opt && p->zero < 1 ? 1 : p->zero,
                             .framework = p->framework, .grad_reduce_bf16 = p->grad_reduce_bf16,
                             .full_recompute = p->recompute == LOOM_RECOMPUTE_FULL,
                             .micro_batches = m, .blocks = blocks, .dp = grp.ranks,
                             .pipelined = p->pp > 1,
                             .shard = loom_parallel_shard_ranks(p, grp.ranks)};
}

static double sync_time(const ctx *x, double n, loom_group grp, int64_t m, int64_t blocks)
{
    loom_dp_sync_in in = sync_in(x, n, grp, m, blocks);
    return loom_dp_sync_time_s(x->c, x->cal, &in, grp);
}

/* The part of a ZeRO-3 sync its per-block prefetch cannot hide (dp_sync.h). */
static double sync_unhidden(const ctx *x, double n, loom_group grp, int64_t m, int64_t blocks)
{
    loom_dp_sync_in in = sync_in(x, n, grp, m, blocks);
    return loom_dp_sync_unhidden_s(x->c, x->cal, &in, grp);
}

/* Megatron's groups of `count` ranks `stride` apart, over the whole job:
 * the slowest of them (one may straddle two nodes when they do not tile). */
static loom_group axis_group(const loom_cluster *c, int64_t count, int64_t stride)
{
    return loom_strided_group(c, count, stride, loom_cluster_gpus(c));
}

/* ---- the evaluation ---------------------------------------------------------- */

/* A layout must have pp · vpp chunks holding the model's L blocks. */
static loom_status check_layout(const loom_eval_opts *o, const loom_parallel *p, int64_t blocks,
                                loom_error *err)
{
    if (o->n_chunks != p->pp * p->vpp)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: the pipeline layout has %d chunks, "
                              "expected --pp %lld x --vpp %lld = %lld",
                              (int)o->n_chunks, (long long)p->pp, (long long)p->vpp,
                              (long long)(p->pp * p->vpp));
    int64_t sum = 0;
    for (int32_t i = 0; i < o->n_chunks; i++) {
        if (o->chunk_layers[i] < 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "impossible configuration: pipeline chunk %d holds %d layers",
                                  (int)i, (int)o->chunk_layers[i]);
        sum += o->chunk_layers[i];
    }
    if (sum != blocks)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: the pipeline layout holds %lld layers, "
                              "the model has %lld",
                              (long long)sum, (long long)blocks);
    return LOOM_OK;
}

static loom_status check_graph(const loom_graph *g, const loom_parallel *p, loom_error *err)
{
    const loom_model_info *info = loom_graph_info_c(g);
    if (info->batch > 0 && info->batch != p->mbs)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "graph %s was built for a batch of %lld but --mbs is %lld (build it "
                              "with batch = mbs)", loom_graph_name(g), (long long)info->batch,
                              (long long)p->mbs);
    if (info->seq > 0 && info->seq != p->seq)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "graph %s was built for sequence length %lld but --seq is %lld",
                              loom_graph_name(g), (long long)info->seq, (long long)p->seq);
    if (info->layers > 0 && info->dtype != p->dtype)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "graph %s was built for %s but --dtype is %s", loom_graph_name(g),
                              loom_dtype_name(info->dtype), loom_dtype_name(p->dtype));
    if (info->layers > 0 && p->flash != info->flash_attention)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "graph %s was built %s fused attention but the configuration says "
                              "%s", loom_graph_name(g), info->flash_attention ? "with" : "without",
                              p->flash ? "flash" : "unfused");
    return LOOM_OK;
}

void loom_eval_result_free(loom_eval_result *r)
{
    if (!r) return;
    free(r->stages);
    r->stages = NULL;
    r->n_stages = 0;
}

loom_status loom_eval_layer_classes(const loom_graph *g, int32_t *cls, loom_error *err)
{
    int32_t n = loom_graph_layer_count(g);
    uint64_t *sig = malloc((size_t)(n ? n : 1) * sizeof *sig);
    if (!sig) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    for (int32_t l = 0; l < n; l++) {
        sig[l] = loom_graph_layer_signature(g, l);
        cls[l] = l;
        for (int32_t k = 0; k < l; k++)
            if (sig[k] == sig[l] && loom_memory_is_block(g, k) == loom_memory_is_block(g, l)) {
                cls[l] = k;
                break;
            }
    }
    free(sig);
    return LOOM_OK;
}

loom_status loom_eval_megatron(const loom_graph *g, const loom_cost_model *cm,
                               const loom_parallel *p, loom_eval_result *out, loom_error *err)
{
    return loom_eval_megatron_ex(g, cm, p, NULL, out, err);
}

loom_status loom_eval_megatron_ex(const loom_graph *g, const loom_cost_model *cm,
                                  const loom_parallel *p, const loom_eval_opts *o,
                                  loom_eval_result *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    const loom_cluster *c = loom_cost_model_cluster(cm);
    int32_t n_layers = loom_graph_layer_count(g), n_t = loom_graph_num_tensors(g);
    loom_model_info mi = *loom_graph_info_c(g);
    int64_t blocks = 0;
    for (int32_t l = 0; l < n_layers; l++) blocks += loom_memory_is_block(g, l);
    if (mi.layers == 0) mi.layers = blocks;
    /* a layout replaces the layer split loom_parallel_check checks (its
     * layers = 0 skips that check) */
    bool layout = o && o->n_chunks > 0;
    if (layout) mi.layers = 0;
    loom_status s = layout ? check_layout(o, p, blocks, err) : LOOM_OK;
    /* All the cluster's GPUs, or the tile of every NVLink domain (cluster.h):
     * then the groups and links are the tile view's. */
    loom_cluster view;
    int64_t world = p->tp * p->pp * p->dp * p->cp;
    if (s == LOOM_OK && world >= 1 && loom_cluster_job_view(c, world, &view)) c = &view;
    else if (s == LOOM_OK && world >= 1 && loom_cluster_tile(c, &view))
        s = loom_error_set(err, LOOM_ERR_INVALID,
                           "impossible configuration: tp %lld × pp %lld × dp %lld × cp %lld = "
                           "%lld GPUs, but the cluster has %lld, or %lld on the %lld-GPU tile "
                           "of each %lld-GPU NVLink domain",
                           (long long)p->tp, (long long)p->pp, (long long)p->dp,
                           (long long)p->cp, (long long)world, (long long)loom_cluster_gpus(c),
                           (long long)loom_cluster_gpus(&view), (long long)view.gpus_per_node,
                           (long long)c->gpus_per_node);
    if (s == LOOM_OK) s = loom_parallel_check(p, &mi, loom_cluster_gpus(c), err);
    if (s == LOOM_OK) s = check_graph(g, p, err);
    if (s) return s;
    double peak = loom_device_peak_flops(&c->gpu, p->dtype);
    if (!(peak > 0))
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "%s has no %s tensor cores (--dtype %s)",
                              c->gpu.name, loom_dtype_name(p->dtype), loom_dtype_name(p->dtype));

    const int64_t S = p->pp, M = p->gbs / (p->mbs * p->dp);
    ctx x = {.g = g, .cm = cm, .c = c, .cal = loom_cost_model_calib(cm), .p = p};
    x.tp = axis_group(c, p->tp, 1);
    x.etp = axis_group(c, p->etp > 0 ? p->etp : p->tp, 1);
    x.cp = axis_group(c, p->cp, p->tp);
    x.ep = axis_group(c, p->ep, loom_parallel_expert_tp(p));
    x.dp = axis_group(c, p->dp * p->cp, p->tp);
    x.edp = axis_group(c, loom_parallel_expert_dp(p), loom_parallel_expert_tp(p) * p->ep);

    layer_cost *lc = calloc((size_t)n_layers, sizeof *lc);
    int32_t *rank = calloc((size_t)n_layers, sizeof *rank);
    int32_t *cls = calloc((size_t)n_layers, sizeof *cls);
    bool *in_stage = calloc((size_t)n_layers, 1);
    double *arr = calloc((size_t)S * 8, sizeof *arr);
    x.col_seen = calloc((size_t)n_t + 1, sizeof *x.col_seen);
    loom_layer_act *acts = calloc((size_t)n_layers, sizeof *acts);
    out->stages = calloc((size_t)S, sizeof *out->stages);
    if (!lc || !rank || !cls || !in_stage || !arr || !x.col_seen || !acts || !out->stages) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "eval: out of memory");
        goto done;
    }
    out->n_stages = S;
    double *stage_s = arr, *bwd_s = arr + S, *sync_s = arr + 2 * S, *window_s = arr + 3 * S,
           *opt_s = arr + 4 * S, *comm_s = arr + 5 * S, *overlap_of = arr + 6 * S,
           *host_s = arr + 7 * S;

    /* Per-layer costs, computed once per class of identical layers. */
    if (o && o->layer_class) memcpy(cls, o->layer_class, (size_t)n_layers * sizeof *cls);
    else if ((s = loom_eval_layer_classes(g, cls, err))) goto done;
    for (int32_t l = 0; l < n_layers; l++) {
        if (cls[l] < l) lc[l] = lc[cls[l]];
        else if ((s = layer_costs(&x, l, &lc[l], err))) goto done;
    }
    assign_ranks(g, p, o, rank);

    /* The hidden state crossing a stage boundary, sequence-sharded
     * (Megatron's scatter-gather sends 1/tp of it even without SP). */
    loom_parallel psp = *p;
    psp.sp = true;
    double boundary = 0;
    memset(x.col_seen, 0, ((size_t)n_t + 1) * sizeof *x.col_seen);   /* reused as scratch */
    for (int32_t l = 0; S > 1 && l < n_layers; l++)
        if (cls[l] == l && loom_memory_is_block(g, l))
            boundary = fmax(boundary, (double)loom_memory_layer_input_bytes(g, &psp, l, x.col_seen));
    bool memory = !(o && o->time_only);
    if (memory || p->cpu_offload_layers > 0) loom_memory_layer_acts(g, p, acts);
    /* CPU activation offloading streams an offloaded block's saved tensors
     * to the host after its forward and back before its backward, beside
     * the next block's compute (Transformer Engine double-buffers them):
     * what the copy takes beyond that compute is exposed */
    double host_Bps = c->gpu.host_Bps > 0 ? c->gpu.host_Bps : LOOM_HOST_LINK_DEFAULT_BPS;
    /* Pipeline neighbours are tp·cp·dp apart; the pipeline paces at its
     * slowest boundary, which crosses nodes unless all pp ranks share one. */
    loom_group pipe = axis_group(c, S, p->tp * p->cp * p->dp);
    double p2p = S > 1 ? coll(&x, LOOM_COLL_SEND_RECV,
                              (loom_group){2, pipe.ranks_per_node >= S ? 2 : 1}, boundary)
                       : 0;

    double mb_model = 0, mb_attn = 0, mb_hw_extra = 0, measured = 0, total = 0;
    out->fits = memory;   /* and every stage below */
    for (int64_t r = 0; r < S; r++) {
        loom_eval_stage *st = &out->stages[r];
        double fwd = 0, bwd = 0, comm = 0, host = 0, a2a_hidden = 0;
        int64_t blocks_here = 0;
        st->first_layer = -1;
        for (int32_t l = 0; l < n_layers; l++) {
            in_stage[l] = rank[l] == r;
            if (!in_stage[l]) continue;
            /* --recompute-num-layers counts in each virtual chunk
             * (Megatron's TransformerBlock is one chunk's layers) */
            if (l == 0 || rank[l - 1] != r) blocks_here = 0;
            if (st->first_layer < 0) st->first_layer = l;
            st->last_layer = l;
            st->n_layers++;
            const layer_cost *c1 = &lc[l];
            bool block = loom_memory_is_block(g, l);
            bool rerun = !(p->recompute == LOOM_RECOMPUTE_FULL && block &&
                           p->recompute_layers > 0 && blocks_here >= p->recompute_layers);
            bool offloaded = block && blocks_here < p->cpu_offload_layers;
            blocks_here += block;
            fwd += c1->fwd_s + c1->comm_fwd_s;
            bwd += c1->bwd_s + c1->comm_bwd_s + (rerun ? c1->recompute_s : 0);
            for (int k = 0; k < LOOM_WORK_COUNT; k++) {
                st->work[k].fwd_s += c1->work[k].fwd_s;
                st->work[k].bwd_s += c1->work[k].bwd_s;
                st->work[k].rerun_s += rerun ? c1->work[k].rerun_s : 0;
            }
            if (offloaded) {
                double copy = (double)acts[l].saved_bytes / host_Bps;
                double out_s = fmax(0, copy - (c1->fwd_s + c1->comm_fwd_s));
                double in_s = fmax(0, copy - (c1->bwd_s + c1->comm_bwd_s));
                fwd += out_s, bwd += in_s, host += out_s + in_s;
                st->work[LOOM_WORK_OFFLOAD].fwd_s += out_s;
                st->work[LOOM_WORK_OFFLOAD].bwd_s += in_s;
            }
            comm += c1->comm_fwd_s + c1->comm_bwd_s + (rerun ? c1->recompute_comm_s : 0);
            /* what the a2a overlap hides of this layer when its forward and
             * backward run beside another micro-batch's */
            if (p->moe_a2a_overlap && c1->moe)
                a2a_hidden += loom_moe_overlap_serial_s(&c1->ph_fwd, &c1->ph_bwd) -
                              loom_moe_overlap_pair_s(&c1->ph_fwd, &c1->ph_bwd);
            mb_model += c1->model_flops;
            mb_attn += c1->attn_flops;
            mb_hw_extra += rerun ? c1->recompute_flops : 0;
            measured += c1->measured_s;
            total += c1->total_s;
        }
        /* ... on the share of its passes the schedule pairs, taken half from
         * each pass. What it hides is the paired passes' communication, and
         * beyond that the combine's kernels (unpermute, residual), which run
         * on the communication stream beside the other pass's compute. */
        double paired = loom_moe_overlap_paired_fraction(S, r, p->vpp, M);
        a2a_hidden *= paired;
        fwd -= a2a_hidden / 2, bwd -= a2a_hidden / 2;
        st->work[LOOM_WORK_A2A_HIDDEN].fwd_s = -a2a_hidden / 2;
        st->work[LOOM_WORK_A2A_HIDDEN].bwd_s = -a2a_hidden / 2;
        comm -= fmin(a2a_hidden, paired * comm);
        st->fwd_s = fwd;
        st->bwd_s = bwd;
        st->comm_s = comm;
        stage_s[r] = fwd + bwd;
        bwd_s[r] = bwd;
        comm_s[r] = comm;
        host_s[r] = host;

        int64_t dense_n, expert_n;
        loom_memory_stage_params(g, p, in_stage, &dense_n, &expert_n);
        double dense = (double)dense_n, expert = (double)expert_n;
        sync_s[r] = sync_time(&x, dense, x.dp, M, blocks_here) +
                    sync_time(&x, expert, x.edp, M, blocks_here);
        st->grad_sync_s = sync_s[r];
        /* ZeRO-3: prefetched per-block collectives, all but the first
         * gather and last scatter of each micro-batch hideable (dp_sync.h) */
        if (p->zero >= 3 && sync_s[r] > 0)
            overlap_of[r] = fmax(0, 1 - (sync_unhidden(&x, dense, x.dp, M, blocks_here) +
                                         sync_unhidden(&x, expert, x.edp, M, blocks_here)) /
                                            sync_s[r]);
        else overlap_of[r] = x.cal->grad_sync_overlap;
        window_s[r] = p->zero >= 3   ? (double)M * stage_s[r]
                      : p->zero == 2 ? (double)M * bwd + fwd   /* a scatter per backward */
                                     : bwd + (p->zero >= 1 || p->dist_opt ? fwd : 0);
        bool sharded = p->zero >= 1 || p->dist_opt;
        /* each rank updates its shard: 1/shard-group of the parameters (HSDP) */
        double shard_dense = (double)loom_parallel_shard_ranks(p, x.dp.ranks);
        double shard_expert = (double)loom_parallel_shard_ranks(p, x.edp.ranks);
        double local = sharded ? ceil(dense / shard_dense) + ceil(expert / shard_expert)
                               : dense + expert;
        opt_s[r] = loom_cost_memory_time_s(cm, LOOM_OPTIM_STEP_BYTES_PER_PARAM * local);

        if (!memory) continue;
        loom_stage_memory_opts mo = {.in_stage = in_stage,
                                     .inflight = loom_memory_inflight_microbatches(S, r, p->vpp, M),
                                     .acts = acts};
        if ((s = loom_memory_stage(g, p, &mo, &st->mem, err))) goto done;
        st->fits = st->mem.total_bytes <= loom_cluster_usable_bytes(c);
        out->fits &= st->fits;
        if (st->mem.total_bytes > out->memory_per_gpu_bytes)
            out->memory_per_gpu_bytes = st->mem.total_bytes;
    }

    loom_pipeline_in pin = {.stages = S, .microbatches = M, .vpp = p->vpp, .stage_s = stage_s,
                            .bwd_s = bwd_s, .p2p_s = p2p,
                            .overlap_p2p = loom_pipeline_overlaps_p2p(
                                p->vpp, p->framework == LOOM_FRAMEWORK_MEGATRON && p->overlap_p2p),
                            .grad_sync_s = sync_s, .sync_window_s = window_s,
                            .sync_overlap = p->overlap_grad_reduce ? x.cal->grad_sync_overlap : 0,
                            .sync_overlap_of = p->overlap_grad_reduce ? overlap_of : NULL,
                            .optimizer_s = opt_s};
    loom_pipeline_out po;
    if ((s = loom_pipeline_step(&pin, &po, err))) goto done;

    loom_pipeline_breakdown(&po, comm_s, host_s, M, &out->breakdown);
    for (int k = 0; k < LOOM_WORK_COUNT; k++) {
        const loom_eval_work_time *w = &out->stages[po.bottleneck].work[k];
        out->work[k] = (loom_eval_work_time){(double)M * w->fwd_s, (double)M * w->bwd_s,
                                             (double)M * w->rerun_s};
    }
    out->step_time_s = po.step_s;
    out->microbatches = M;
    out->gpus = loom_cluster_gpus(c);
    out->idle_gpus = c->nodes * c->idle_per_node;
    /* The graph is one micro-batch; a step is gbs / mbs of them. */
    double mbs_per_step = (double)(p->gbs / p->mbs);
    out->model_flops = mb_model * mbs_per_step;
    out->model_flops_causal = (mb_model - 1.5 * mb_attn) * mbs_per_step;
    out->hardware_flops = (mb_model + mb_hw_extra) * mbs_per_step;
    out->tokens_per_s = (double)p->gbs * (double)p->seq / out->step_time_s;
    out->peak_flops = peak;
    double per_gpu = out->step_time_s * (double)out->gpus;
    out->model_tflops_per_gpu = out->model_flops / per_gpu / 1e12;
    out->hardware_tflops_per_gpu = out->hardware_flops / per_gpu / 1e12;
    out->mfu = out->model_flops / per_gpu / peak;
    out->hfu = out->hardware_flops / per_gpu / peak;
    out->memory_capacity_bytes = c->gpu.hbm_bytes;
    out->measured_fraction = total > 0 ? measured / total : 0;
done:
    free(lc);
    free(rank);
    free(cls);
    free(in_stage);
    free(arr);
    free(x.col_seen);
    free(acts);
    return s;
}
