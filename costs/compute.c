/*
 * compute.c — forward and backward time of one op on its shard.
 *
 * Shard. A split {dim, parts} divides every operand dim with that name by
 * parts (it must divide). The shard's FLOPs are the op's FLOPs (graph.c)
 * scaled by its work ratio:
 *   einsum     Π parts over the split dims among its letters (FLOPs are
 *              2·Π letter sizes, and every operand dim is a letter);
 *   attention  recomputed from the shard sizes, 2·b·heads·s·t·(dqk + dv):
 *              kvh is not a factor (the heads already count the work);
 *   others     the ratio of their largest non-weight operand (pointwise work
 *              follows the elements; a vocab-split embedding still gathers
 *              every token, its output is not divided by v).
 * The shard's bytes are its operands' shard bytes (embedding: 2 × output,
 * as graph.c: it reads only the gathered rows).
 *
 * Time. The profile db answers first (costs/profile_db.h: measured, else
 * interpolated). Otherwise the roofline, per kernel:
 *     t = max(F / (peak · eff), bytes / (hbm_bw · mem_eff)) + kernel_overhead
 *   einsum     tensor-core peak of its dtype, eff(F) = gemm_eff_max ·
 *              F/(F + gemm_half_flops) per GEMM; forward is one GEMM, backward
 *              one GEMM per operand gradient (dX, dW: bwd_flops / kernels
 *              each);
 *   attention  tensor-core peak × attn_eff with the same roll-off; a causal
 *              mask makes flash kernels skip the tiles above the diagonal:
 *              with nb = ceil(s / 128) blocks of 128 (FlashAttention-2's
 *              tile, Dao 2023) and s = t they compute (nb + 1) / (2·nb) of
 *              the full work, ≈ 1/2 for long sequences, while the graph
 *              counts the full work (model FLOPs, Korthikanti et al.);
 *              queries that come last (s < t, decoding) see more keys;
 *              backward is one fused
 *              kernel plus its dq/preprocess pass (2 kernels);
 *   others     the CUDA-core peak × vector_eff (they are memory-bound);
 *              one fused kernel each, or under eager PyTorch
 *              (loom_cost_model_set_elementwise) RMSNorm, rotary embedding
 *              and SwiGLU as their chains of kernels, each a pass through
 *              HBM (eager.h) at eager_mem_eff (calib.c), in the backward
 *              too.
 * Three eager paths of Megatron-Core that its fused kernels do not cover
 * are priced where a model property selects them (details at each), plain
 * ATen kernels at eager_mem_eff too: the experts' output bias of a model
 * with expert biases (gpt-oss) and, since such a model runs without
 * bias_dropout_fusion, a row-parallel layer's bias; and the rotary
 * embedding of a YaRN model without MLA, for which Megatron turns RoPE
 * fusion off.
 * Backward moves about twice the forward bytes: for y = xW, dX = dY·Wᵀ
 * reads dY, W and writes dX; dW = Xᵀ·dY reads X, dY and writes dW, i.e.
 * 2·(|X| + |W| + |Y|); pointwise backward reads x and dy and writes dx.
 * Views (reshape, transpose) cost nothing.
 *
 * Mixture of experts (costs/moe.h). The router's top-k and the dispatch
 * and combine ops are not one pass each but the kernels Megatron-Core runs
 * for them (fused top-k / aux loss; permute, sort by local expert, FP8
 * padding and their inverses), each pass its bytes at the streaming
 * prior (eager_mem_eff: plain streaming kernels, see pass_s) plus a
 * launch; a data movement's backward moves the same bytes as its
 * forward. Ops on routed tokens ([e, c, …]) under expert parallelism run
 * at the busiest rank's load (loom_moe_max_load_factor) with the GPU's
 * E/P experts as the grouped GEMM's groups.
 *
 * Units: seconds, FLOPs, bytes.
 */
#include "costs/compute.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "costs/eager.h"
#include "costs/moe.h"
#include "costs/te_fp8.h"

#define FLASH_BLOCK 128

struct loom_cost_model {
    loom_cluster cluster;
    loom_calib cal;
    loom_attn_kernel attn;  /* the attention kernel the run launches */
    loom_elementwise_mode elementwise;   /* fused or eager element-wise ops (eager.h) */
    loom_profile_db *db;   /* NULL = roofline only */
    bool db_borrowed;      /* a view's db is its base's (loom_cost_model_view) */
};

/* Same GPU: canonical names equal, or both names resolve to one preset. */
static bool same_device(const char *a, const char *b)
{
    if (strcasecmp(a, b) == 0) return true;
    const loom_device *da = loom_device_find(a), *db = loom_device_find(b);
    return da && da == db;
}

loom_status loom_cost_model_create(const loom_cluster *c, const loom_calib *cal,
                                   const char *profile_db_path, loom_cost_model **out,
                                   loom_error *err)
{
    *out = NULL;
    loom_cost_model *m = calloc(1, sizeof *m);
    if (!m) return loom_error_set(err, LOOM_ERR_NOMEM, "cost model: out of memory");
    loom_status s = LOOM_OK;
    m->cluster = *c;
    if (cal) m->cal = *cal;
    else loom_calib_default(&c->gpu, &m->cal);
    if ((s = loom_calib_validate(&m->cal, err))) goto fail;
    if (profile_db_path) {
        if ((s = loom_profile_db_load(profile_db_path, &m->db, err))) goto fail;
        const char *dev = loom_profile_db_device(m->db);
        if (!same_device(dev, c->gpu.name)) {
            s = loom_error_set(err, LOOM_ERR_INVALID,
                               "%s: the profile db was measured on \"%s\", but cluster %s has "
                               "%s GPUs (a db is only valid for the GPU it was measured on)",
                               profile_db_path, dev, c->name, c->gpu.name);
            goto fail;
        }
    }
    *out = m;
    return LOOM_OK;
fail:
    loom_cost_model_destroy(m);
    return s;
}

void loom_cost_model_set_attention(loom_cost_model *m, loom_attn_kernel k)
{
    m->attn = k;
}

loom_attn_kernel loom_cost_model_attention(const loom_cost_model *m)
{
    return m->attn;
}

void loom_cost_model_set_elementwise(loom_cost_model *m, loom_elementwise_mode e)
{
    m->elementwise = e;
}

loom_elementwise_mode loom_cost_model_elementwise(const loom_cost_model *m)
{
    return m->elementwise;
}

loom_status loom_cost_model_view(const loom_cost_model *base, const loom_cluster *c,
                                 loom_cost_model **out, loom_error *err)
{
    *out = NULL;
    loom_cost_model *m = calloc(1, sizeof *m);
    if (!m) return loom_error_set(err, LOOM_ERR_NOMEM, "cost model: out of memory");
    *m = *base;
    m->cluster = *c;
    m->db_borrowed = true;
    *out = m;
    return LOOM_OK;
}

void loom_cost_model_destroy(loom_cost_model *m)
{
    if (!m) return;
    if (!m->db_borrowed) loom_profile_db_destroy(m->db);
    free(m);
}

const loom_cluster *loom_cost_model_cluster(const loom_cost_model *m)
{
    return &m->cluster;
}

const loom_calib *loom_cost_model_calib(const loom_cost_model *m)
{
    return &m->cal;
}

const loom_profile_db *loom_cost_model_profile_db(const loom_cost_model *m)
{
    return m->db;
}

/* ---- shards ---------------------------------------------------------------- */

/* Divides tensor t's dims by the splits naming them into shard[]; returns
 * the product of the parts applied (numel ratio full / shard). */
static loom_status shard_dims(const loom_op *op, const loom_tensor *t,
                              const loom_dim_split *splits, int n_splits, int64_t *shard,
                              int64_t *ratio, loom_error *err)
{
    *ratio = 1;
    for (int d = 0; d < t->ndim; d++) {
        shard[d] = t->dims[d].size;
        for (int i = 0; i < n_splits; i++) {
            if (strcmp(splits[i].dim, t->dims[d].name) != 0) continue;
            if (shard[d] % splits[i].parts != 0)
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "op %s: dim \"%s\" of %s has %lld, not divisible into %lld "
                                      "parts",
                                      op->name, t->dims[d].name, t->name, (long long)shard[d],
                                      (long long)splits[i].parts);
            shard[d] /= splits[i].parts;
            *ratio *= splits[i].parts;
        }
    }
    return LOOM_OK;
}

/* Everything the roofline needs about the op's shard. */
typedef struct {
    double fwd_flops, bwd_flops;   /* hardware FLOPs of the shard */
    double bytes;                  /* forward bytes of the shard */
    double in_bytes, out_bytes;    /* first input's and first output's shard bytes */
    double weight_bytes;           /* the weights' shard bytes */
    loom_dtype dtype;              /* compute dtype */
} shard_work;

/* Fraction of the (query block, key block) tiles a causal flash kernel
 * computes for s queries at the last s of t key positions (query i sits at
 * position t - s + i; decoding, s = 1, sees every key). Tiles are
 * FLASH_BLOCK square; a tile is computed when its first key is not after the
 * last query of the block. For s = t with nb blocks this is
 * Σ_{j=1..nb} j / nb² = (nb + 1) / (2·nb). */
static double causal_fraction(int64_t s, int64_t t)
{
    if (s <= 0 || t <= 0 || s > t) return 1;
    int64_t nq = (s + FLASH_BLOCK - 1) / FLASH_BLOCK, nk = (t + FLASH_BLOCK - 1) / FLASH_BLOCK;
    double tiles = 0;
    for (int64_t j = 0; j < nq; j++) {
        int64_t last_q = t - s + ((j + 1) * FLASH_BLOCK < s ? (j + 1) * FLASH_BLOCK : s) - 1;
        tiles += (double)(last_q / FLASH_BLOCK + 1);
    }
    return tiles / ((double)nq * (double)nk);
}

/* weight_div further divides the weights' bytes (experts a GPU does not
 * hold under expert parallelism the splits do not show; 1 = none). */
static loom_status shard_of(const loom_graph *g, const loom_op *op, const loom_dim_split *splits,
                            int n_splits, double weight_div, shard_work *w, loom_error *err)
{
    int32_t ids[3 * LOOM_MAX_IO];
    bool weight[3 * LOOM_MAX_IO];
    int n = 0;
    for (int i = 0; i < op->n_in; i++) weight[n] = false, ids[n++] = op->in[i];
    for (int i = 0; i < op->n_w; i++) weight[n] = true, ids[n++] = op->w[i];
    for (int i = 0; i < op->n_out; i++) weight[n] = false, ids[n++] = op->out[i];

    int64_t shard[3 * LOOM_MAX_IO][LOOM_MAX_DIMS], parts[3 * LOOM_MAX_IO];
    w->in_bytes = w->out_bytes = w->weight_bytes = 0;
    double bytes = 0, largest = -1, big_ratio = 1;
    for (int k = 0; k < n; k++) {
        const loom_tensor *t = loom_graph_tensor(g, ids[k]);
        loom_status s = shard_dims(op, t, splits, n_splits, shard[k], &parts[k], err);
        if (s) return s;
        double tb = (double)loom_tensor_bytes(t) / (double)parts[k];
        bytes += weight[k] ? tb / weight_div : tb;
        if (weight[k]) w->weight_bytes += tb / weight_div;
        if (k == 0 && op->n_in > 0) w->in_bytes = tb;
        if (k == op->n_in + op->n_w) w->out_bytes = tb;
        double numel = (double)loom_tensor_numel(t);
        if (!weight[k] && numel > largest) largest = numel, big_ratio = (double)parts[k];
    }

    const loom_tensor *in0 = op->n_in ? loom_graph_tensor(g, op->in[0]) : NULL;
    const loom_tensor *out0 = op->n_out ? loom_graph_tensor(g, op->out[0]) : NULL;
    double ratio = big_ratio;
    if (op->kind == LOOM_OP_EINSUM) {
        /* Distinct split names among the operand dims: each letter once. */
        ratio = 1;
        for (int i = 0; i < n_splits; i++) {
            bool present = false;
            for (int k = 0; k < n && !present; k++) {
                const loom_tensor *t = loom_graph_tensor(g, ids[k]);
                present = loom_tensor_dim_index(t, splits[i].dim) >= 0;
            }
            if (present) ratio *= (double)splits[i].parts;
        }
    } else if (op->kind == LOOM_OP_ATTENTION) {
        /* q [b,s,heads,dqk] = shard[0], k [b,t,kvh,dqk] = shard[1], v = shard[2]. */
        const loom_tensor *kt = loom_graph_tensor(g, op->in[1]), *vt = loom_graph_tensor(g, op->in[2]);
        double full = (double)in0->dims[0].size * (double)in0->dims[1].size *
                      (double)in0->dims[2].size * (double)kt->dims[1].size *
                      (double)(in0->dims[3].size + vt->dims[3].size);
        double part = (double)shard[0][0] * (double)shard[0][1] * (double)shard[0][2] *
                      (double)shard[1][1] * (double)(shard[0][3] + shard[2][3]);
        ratio = full / part;
        if (op->causal) ratio /= causal_fraction(shard[0][1], shard[1][1]);
    }
    if (op->kind == LOOM_OP_EMBEDDING && out0)   /* reads only the gathered rows */
        bytes = 2.0 * (double)loom_tensor_bytes(out0) / (double)parts[op->n_in + op->n_w];
    w->in_bytes = op->n_in > 0 ? w->in_bytes : 0;
    w->out_bytes = op->n_out > 0 ? w->out_bytes : 0;
    w->fwd_flops = (double)op->fwd_flops / ratio;
    w->bwd_flops = (double)op->bwd_flops / ratio;
    w->bytes = bytes;
    /* Compute dtype: the table's for an embedding (its input is token ids),
     * else the first input's (the output's when that is an integer). */
    w->dtype = in0 ? in0->dtype : (out0 ? out0->dtype : LOOM_DTYPE_BF16);
    if (op->kind == LOOM_OP_EMBEDDING && op->n_w) w->dtype = loom_graph_tensor(g, op->w[0])->dtype;
    else if (in0 && out0 && (in0->dtype == LOOM_DTYPE_INT64 || in0->dtype == LOOM_DTYPE_INT32 ||
                             in0->dtype == LOOM_DTYPE_U8))
        w->dtype = out0->dtype;
    return LOOM_OK;
}

/* ---- roofline -------------------------------------------------------------- */

double loom_cost_memory_time_s(const loom_cost_model *m, double bytes)
{
    if (!(bytes > 0)) return 0;
    return bytes / (m->cluster.gpu.hbm_bw_Bps * m->cal.mem_eff);
}

/* The same for plain ATen streaming kernels (eager chains, Megatron-Core's
 * eager paths): eager_mem_eff, not the fitted in-run mem_eff (calib.c). */
static double eager_memory_time_s(const loom_cost_model *m, double bytes)
{
    if (!(bytes > 0)) return 0;
    return bytes / (m->cluster.gpu.hbm_bw_Bps * m->cal.eager_mem_eff);
}

/* One tensor-core kernel of F FLOPs at peak × eff_max × roll-off. The
 * roll-off's fixed cost is a time (launch, tail wave, epilogue), fitted as
 * gemm_half_flops of bf16 work: at another dtype's peak the same time is
 * gemm_half_flops · peak / peak_bf16 FLOPs. */
static double kernel_s(const loom_cost_model *m, double flops, double peak, double eff_max,
                       double half_bf16)
{
    if (!(flops > 0)) return 0;
    double bf16 = loom_device_peak_flops(&m->cluster.gpu, LOOM_DTYPE_BF16);
    double half = half_bf16 * (bf16 > 0 ? peak / bf16 : 1);
    double eff = eff_max * flops / (flops + half);
    return flops / (peak * eff);
}

/* A GEMM-like tensor-core kernel (einsum, grouped expert GEMM). */
static double tensor_kernel_s(const loom_cost_model *m, double flops, double peak, double eff_max)
{
    return kernel_s(m, flops, peak, eff_max, m->cal.gemm_half_flops);
}

/* A fused attention kernel: its own efficiency and a larger fixed cost. */
static double attention_kernel_s(const loom_cost_model *m, double flops, double peak)
{
    double eff = m->cal.attn_eff * (m->attn != LOOM_ATTN_FUSED ? m->cal.attn_fa2_frac : 1);
    return kernel_s(m, flops, peak, eff, m->cal.attn_half_flops);
}

/* Whether an earlier FP8 GEMM of the layer reads the same input: Megatron
 * runs q/k/v as one linear_qkv and gate/up as one linear_fc1 (experts: one
 * TEGroupedLinear fc1), so the input is cast once and the later GEMMs of
 * the graph reuse that fp8 copy. */
static bool fp8_input_cast_before(const loom_graph *g, const loom_op *op, int32_t op_id,
                                  loom_dtype stored)
{
    /* a layer's ops are a contiguous run of ids (graph.h) */
    for (int32_t i = op_id - 1; i >= 0; i--) {
        const loom_op *o = loom_graph_op(g, i);
        if (o->layer != op->layer) break;
        if (o->n_in > 0 && o->in[0] == op->in[0] && loom_te_fp8_gemm(g, o, stored)) return true;
    }
    return false;
}

/* Whether TE casts this GEMM's input to fp8 inside the kernel that produced
 * it: Megatron builds the QKV and FC1 projections as
 * TELayerNormColumnParallelLinear, whose norm kernel writes the fp8 copy
 * (and its transpose) itself. The attention projection's input (the
 * attention output) and FC2's (Megatron's own fused SwiGLU) are cast by a
 * separate cast-transpose kernel. Views (reshape, transpose) are looked
 * through. */
static bool fp8_cast_fused_in_norm(const loom_graph *g, const loom_op *op)
{
    if (op->n_in < 1) return false;
    int32_t t = op->in[0];
    for (int hops = 0; hops < 8; hops++) {
        int32_t p = loom_graph_tensor(g, t)->producer;
        if (p < 0) return false;
        const loom_op *prod = loom_graph_op(g, p);
        if (prod->kind == LOOM_OP_NORM) return true;
        if ((prod->kind != LOOM_OP_RESHAPE && prod->kind != LOOM_OP_TRANSPOSE) || prod->n_in < 1)
            return false;
        t = prod->in[0];
    }
    return false;
}

double loom_cost_gemm_time_s(const loom_cost_model *m, double flops, loom_dtype t)
{
    double peak = loom_device_peak_flops(&m->cluster.gpu, t);
    if (!(peak > 0)) return HUGE_VAL;
    return tensor_kernel_s(m, flops, peak, m->cal.gemm_eff_max) + m->cal.kernel_overhead_s;
}

/* A grouped GEMM kernel (MoE experts) schedules the tiles of all its groups
 * as one launch: it costs one GEMM of the total work plus a fixed share per
 * group (tile-scheduler setup and the ragged tail of each group's tiles).
 * Measured on an H100 (bench/grouped_gemm_torch.py, torch._grouped_mm,
 * Qwen3-30B-A3B and gpt-oss-120b experts under EP 8, 16 groups of 128-1024
 * tokens): grouped minus one dense GEMM of the same work is 0.6-1.5 us per
 * group, median 0.9; the same experts as separate GEMMs cost 1.1-2.4x
 * the grouped kernel. */
#define GROUPED_GEMM_GROUP_S 0.9e-6

static double grouped_kernel_s(const loom_cost_model *m, double flops, double groups, double peak)
{
    if (!(groups > 1)) return tensor_kernel_s(m, flops, peak, m->cal.gemm_eff_max);
    return tensor_kernel_s(m, flops, peak, m->cal.gemm_eff_max) + groups * GROUPED_GEMM_GROUP_S;
}

double loom_cost_grouped_gemm_time_s(const loom_cost_model *m, double flops, double groups,
                                     loom_dtype t)
{
    double peak = loom_device_peak_flops(&m->cluster.gpu, t);
    if (!(peak > 0)) return HUGE_VAL;
    return grouped_kernel_s(m, flops, groups, peak) + m->cal.kernel_overhead_s;
}

/* The GEMMs an expert einsum runs as one grouped kernel: its experts on
 * this GPU (the weight's "e" over the parts it is split into and over the
 * expert-parallel ranks the splits do not show), 1 for any other einsum. An
 * expert einsum's input is already dispatched per expert (it has "e" too);
 * the router gate's weight [h, e] has "e" but its input does not: it is one
 * GEMM. */
static double expert_groups(const loom_graph *g, const loom_op *op, const loom_dim_split *splits,
                            int n_splits, int64_t ep)
{
    if (op->n_w < 1 || op->n_in < 1) return 1;
    const loom_tensor *w0 = loom_graph_tensor(g, op->w[0]);
    int e = loom_tensor_dim_index(w0, "e");
    if (e < 0 || loom_tensor_dim_index(loom_graph_tensor(g, op->in[0]), "e") < 0) return 1;
    int64_t parts = ep;
    for (int i = 0; i < n_splits; i++)
        if (strcmp(splits[i].dim, "e") == 0) parts *= splits[i].parts;
    double groups = (double)(w0->dims[e].size / parts);
    return groups >= 1 ? groups : 1;
}

static double maxd(double a, double b)
{
    return a > b ? a : b;
}

/* ---- rotary embedding without Megatron's fusion ---------------------------- */

/* Megatron fuses RoPE (TE's fused_apply_rotary_pos_emb) only for
 * position_embedding_type "rope": Megatron-Bridge turns apply_rope_fusion off
 * for any other (src/megatron/bridge/utils/fusions.py,
 * validate_rope_fusion_compatibility, "similar to arguments.py logic"; its
 * performance scripts ask for the fusion on every model), and gpt-oss's
 * bridge sets "yarn". Multi-latent attention keeps it (the same check lets
 * MLA through). Without it megatron/core/models/common/embeddings/
 * rope_utils.py _apply_rotary_pos_emb_bshd runs in eager PyTorch, per
 * element of q (and of k) of a bytes:
 *     -x2 (a), cat(-x2, x1) (2a), t·cos (2a), rot·sin (2a), + (3a),
 *     cat(t, t_pass) with t_pass empty (2a)        = 12a, 6 kernels;
 * backward g·sin (2a), -g (a), chunk's cat (2a), g·cos (2a), the two
 * gradients of t summed (3a)                        = 10a, 5 kernels
 * (the fused kernel, as loom prices a rope op otherwise: 2a and 4a). */
#define YARN_ROPE_FWD_PASSES 12.0   /* passes of the output's bytes (a per element) */
#define YARN_ROPE_BWD_PASSES 10.0
#define YARN_ROPE_FWD_KERNELS 6
#define YARN_ROPE_BWD_KERNELS 5

static bool unfused_yarn_rope(const loom_graph *g, const loom_op *op)
{
    const loom_model_info *mi = loom_graph_info_c(g);
    return op->kind == LOOM_OP_ELEMENTWISE && strcmp(op->fn, "rope") == 0 &&
           strcmp(mi->facts.rope_scaling, "yarn") == 0 && mi->kv_lora_rank == 0;
}

/* ---- mixture of experts (costs/moe.h) ------------------------------------- */

/* Expert output biases (gpt-oss's down_proj_bias [e, h]). Megatron-Core
 * builds the experts' fc2 with skip_bias_add and adds the bias, weighted by
 * each row's routing probability, in eager PyTorch after the grouped GEMM
 * (megatron/core/transformer/moe/experts.py, TEGroupedMLP._apply_bias, core
 * 0.15 / NeMo 25.11; HEAD keeps it as the path without CUDA graphs):
 *     torch.cat([t + b * p for t, b, p in zip(split(out), biases, split(probs))])
 * per local expert b·p writes its rows (1 pass of the output's bytes O) and
 * t + b·p reads two and writes one (3), then cat copies them (2): 6 O and
 * 2 kernels per expert + 1. Autograd: the gradient of b is sum(g·p) and of
 * p sum(g·b) (a product written and read back, then reduced: 3 O each) and
 * split's backward concatenates t's gradients (2 O): 8 O, 4 kernels per
 * expert + 1. The probabilities have the router's dtype, bf16 for gpt-oss
 * (moe_router_dtype unset), so nothing is upcast. fc1's bias [e, 2f] is
 * TE's grouped-GEMM epilogue (skip_bias_add=False) and costs nothing here. */
#define EXPERT_BIAS_FWD_PASSES 6.0
#define EXPERT_BIAS_BWD_PASSES 8.0

/* A model with expert biases also runs without bias_dropout_fusion:
 * Megatron-Core refuses the fusion in TEGroupedMLP when add_bias_linear is
 * set (experts.py: "bias_dropout_fusion is not supported in TEGroupedMLP
 * when add_bias_linear=True"; the gpt-oss bridge sets it False). A row-
 * parallel layer (the attention's linear_proj) returns its bias to the
 * bias-dropout-add (skip_bias_add), which then adds it in a kernel of its
 * own, x = x + bias, before the residual add (megatron/core/fusions/
 * fused_bias_dropout.py, _bias_dropout_add_func; dropout at p = 0 returns
 * its input, no kernel): 2 passes of the output forward; backward the
 * bias gradient, a sum over the tokens, 1 pass. The residual add is the
 * graph's own op. */
#define UNFUSED_BIAS_FWD_PASSES 2.0
#define UNFUSED_BIAS_BWD_PASSES 1.0

/* Whether the einsum's first input has a dim its output lacks among the
 * tensor-parallel row dims (heads, f): a row-parallel projection. */
static bool row_parallel(const loom_graph *g, const loom_op *op)
{
    static const char *const rows[] = {"heads", "f"};
    const loom_tensor *in0 = loom_graph_tensor(g, op->in[0]), *out0 = loom_graph_tensor(g, op->out[0]);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (loom_tensor_dim_index(in0, rows[i]) >= 0 && loom_tensor_dim_index(out0, rows[i]) < 0)
            return true;
    return false;
}

/* Forward and backward time of the bias kernels Megatron-Core runs after
 * op in a model with expert biases (0 for other ops and models): the
 * experts' down projection (an expert einsum, its input per expert, whose
 * output has no "f"; groups: its local experts) and a row-parallel einsum
 * with a bias. out_bytes: the output's shard bytes. */
static void unfused_bias_time(const loom_cost_model *m, const loom_graph *g, const loom_op *op,
                             double groups, double out_bytes, double *fwd_s, double *bwd_s)
{
    *fwd_s = *bwd_s = 0;
    if (!loom_graph_info_c(g)->expert_bias || op->kind != LOOM_OP_EINSUM || op->n_w < 1 ||
        op->n_in < 1 || op->n_out < 1)
        return;
    const loom_tensor *in0 = loom_graph_tensor(g, op->in[0]), *w0 = loom_graph_tensor(g, op->w[0]);
    const loom_tensor *out0 = loom_graph_tensor(g, op->out[0]);
    double k = m->cal.kernel_overhead_s;
    bool expert = loom_tensor_dim_index(w0, "e") >= 0 && loom_tensor_dim_index(in0, "e") >= 0;
    if (expert && loom_tensor_dim_index(out0, "f") < 0) {
        *fwd_s = eager_memory_time_s(m, EXPERT_BIAS_FWD_PASSES * out_bytes) + (2 * groups + 1) * k;
        *bwd_s = eager_memory_time_s(m, EXPERT_BIAS_BWD_PASSES * out_bytes) + (4 * groups + 1) * k;
    } else if (!expert && op->bias && row_parallel(g, op)) {
        *fwd_s = eager_memory_time_s(m, UNFUSED_BIAS_FWD_PASSES * out_bytes) + k;
        *bwd_s = eager_memory_time_s(m, UNFUSED_BIAS_BWD_PASSES * out_bytes) + k;
    }
}

static int64_t split_parts(const loom_dim_split *splits, int n_splits, const char *dim)
{
    int64_t parts = 1;
    for (int i = 0; i < n_splits; i++)
        if (strcmp(splits[i].dim, dim) == 0) parts *= splits[i].parts;
    return parts;
}

static bool has_dim(const loom_tensor *t, const char *name)
{
    return loom_tensor_dim_index(t, name) >= 0;
}

/* The top-k of the op's layer: its dispatch or router op's, else the
 * model's (0 when neither says). */
static int64_t layer_topk(const loom_graph *g, const loom_op *op, int32_t op_id)
{
    /* a layer's ops are a contiguous run of ids (graph.h); the router and
     * the dispatch come before the experts */
    if (op->topk > 0) return op->topk;
    for (int32_t i = op_id - 1; i >= 0; i--) {
        const loom_op *o = loom_graph_op(g, i);
        if (o->layer != op->layer) break;
        if ((o->kind == LOOM_OP_MOE_DISPATCH || o->kind == LOOM_OP_MOE_ROUTE) && o->topk > 0)
            return o->topk;
    }
    return loom_graph_info_c(g)->experts_topk;
}

/* An op on routed tokens in per-expert buffers [e, c, …]: the dispatch's
 * output, or the first input of the expert GEMMs, their activation and the
 * combine. */
typedef struct {
    bool on;
    int64_t experts, topk;   /* E, k */
    int64_t ep;              /* P: ranks sharing the experts (ep × the parts of "e") */
    int64_t local_experts;   /* E / P */
    double load_factor;      /* loom_moe_max_load_factor over the P ranks */
} moe_view;

static moe_view moe_of(const loom_graph *g, const loom_op *op, int32_t op_id,
                       const loom_dim_split *splits, int n_splits, int64_t ep)
{
    moe_view v = {0};
    const loom_tensor *buf = NULL;
    if (op->kind == LOOM_OP_MOE_DISPATCH && op->n_out > 0) buf = loom_graph_tensor(g, op->out[0]);
    else if (op->n_in > 0) buf = loom_graph_tensor(g, op->in[0]);
    if (!buf || !has_dim(buf, "e") || !has_dim(buf, "c")) return v;
    v.on = true;
    v.experts = buf->dims[loom_tensor_dim_index(buf, "e")].size;
    v.topk = layer_topk(g, op, op_id);
    v.ep = (ep > 1 ? ep : 1) * split_parts(splits, n_splits, "e");
    v.local_experts = v.experts / v.ep > 1 ? v.experts / v.ep : 1;
    /* the group's tokens: each of its ep ranks fills c slots of each of the
     * E experts with k slots per token (c = ⌈T·k/E⌉, hf_build.c) */
    double c = (double)buf->dims[loom_tensor_dim_index(buf, "c")].size /
               (double)split_parts(splits, n_splits, "c");
    double tokens = v.topk > 0 ? (double)(ep > 1 ? ep : 1) * c * (double)v.experts / (double)v.topk : 0;
    v.load_factor = loom_moe_max_load_factor(v.experts, v.topk, v.ep, tokens);
    return v;
}

/* One dispatcher pass: its HBM traffic plus a launch per kernel. The
 * router's, permute's, sort's and padding's kernels (Transformer Engine's
 * fused top-k and moe_permute, sort_chunks_by_idxs, Fp8Padding) are plain
 * streaming kernels: priced at eager_mem_eff, the streaming prior, like the
 * eager chains, not at the fitted mem_eff, which is the residual of dense
 * Megatron steps (0.40 on H100, calib.c) and would charge these data
 * movements 2.1x their bytes. With the residual, MoE layers' routing came to
 * a third of Qwen3-30B-A3B's step on 8 GB200 and the Megatron-Bridge MoE
 * runs were off +10% to +22% where routing weighs most (Qwen3-30B-A3B,
 * Qwen3-235B-A22B on GB200, DeepSeek-V3 at EP32); at the prior the MoE
 * rows' median |error| went from 9.5% to 6.9% before refitting. */
static double pass_s(const loom_cost_model *m, loom_moe_pass p)
{
    return eager_memory_time_s(m, p.bytes) + p.kernels * m->cal.kernel_overhead_s;
}

/* Dispatch and combine: Megatron's permutation kernels (moe.h) on the
 * rank's own tokens ([b, s, h], the token side's shard). */
static loom_status dispatcher_time(const loom_cost_model *m, const loom_graph *g, const loom_op *op,
                                   const loom_dim_split *splits, int n_splits, const moe_view *v,
                                   loom_op_time *out, loom_error *err)
{
    bool dispatch = op->kind == LOOM_OP_MOE_DISPATCH;
    const loom_tensor *tok = loom_graph_tensor(g, dispatch ? op->in[0] : op->out[0]);
    int64_t shard[LOOM_MAX_DIMS], ratio;
    loom_status s = shard_dims(op, tok, splits, n_splits, shard, &ratio, err);
    if (s) return s;
    double row = (double)loom_dtype_bytes(tok->dtype);
    if (tok->ndim > 0) row *= (double)shard[tok->ndim - 1];
    double tokens = row > 0 ? (double)loom_tensor_bytes(tok) / (double)ratio / row : 0;
    loom_moe_side side = {.tokens = tokens, .row_bytes = row, .topk = v->topk > 0 ? v->topk : op->topk,
                          .local_experts = v->local_experts, .ep = v->ep,
                          .load_factor = v->load_factor,
                          .fp8_padding = loom_te_fp8_graph(g, tok->dtype)};
    loom_moe_pass f, b;
    loom_moe_permute_passes(&side, dispatch, &f, &b);
    *out = (loom_op_time){pass_s(m, f), pass_s(m, b), LOOM_SRC_ROOFLINE};
    return LOOM_OK;
}

/* The router after its gate: TE's fused top-k (and aux-loss) kernels over
 * the logits [b, s, e] of the rank's tokens. */
static void router_time(const loom_cost_model *m, const loom_graph *g, const loom_op *op,
                        const shard_work *w, loom_op_time *out)
{
    const loom_tensor *lg = loom_graph_tensor(g, op->in[0]);
    int d = loom_tensor_dim_index(lg, "e");
    int64_t experts = d >= 0 ? lg->dims[d].size : (lg->ndim ? lg->dims[lg->ndim - 1].size : 1);
    double elem = (double)loom_dtype_bytes(lg->dtype);
    double tokens = elem > 0 && experts > 0 ? w->in_bytes / elem / (double)experts : 0;
    bool aux = loom_graph_info_c(g)->facts.router_balance[0] != '\0';
    loom_moe_pass f, b;
    loom_moe_router_passes(tokens, experts, aux, &f, &b);
    *out = (loom_op_time){pass_s(m, f), pass_s(m, b), LOOM_SRC_ROOFLINE};
}

loom_status loom_cost_op_time(const loom_cost_model *m, const loom_graph *g, int32_t op_id,
                              const loom_dim_split *splits, int n_splits, loom_op_time *out,
                              loom_error *err)
{
    return loom_cost_op_time_ep(m, g, op_id, splits, n_splits, 1, out, err);
}

/* The busiest expert-parallel rank runs load_factor × the mean rows. */
static void busiest(const moe_view *v, loom_op_time *t)
{
    if (!v->on || !(v->load_factor > 1)) return;
    t->fwd_s *= v->load_factor;
    t->bwd_s *= v->load_factor;
}

loom_status loom_cost_op_time_ep(const loom_cost_model *m, const loom_graph *g, int32_t op_id,
                                 const loom_dim_split *splits, int n_splits, int64_t ep,
                                 loom_op_time *out, loom_error *err)
{
    if (op_id < 0 || op_id >= loom_graph_num_ops(g))
        return loom_error_set(err, LOOM_ERR_INVALID, "op id %d is not in graph %s (it has %d ops)",
                              (int)op_id, loom_graph_name(g), (int)loom_graph_num_ops(g));
    const loom_op *op = loom_graph_op(g, op_id);
    if (n_splits < 0 || (n_splits > 0 && !splits))
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: %d splits given", op->name, n_splits);
    for (int i = 0; i < n_splits; i++)
        if (!splits[i].dim || splits[i].parts < 1)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: split %d: expected a dim name and parts >= 1, found %s "
                                  "into %lld",
                                  op->name, i, splits[i].dim ? splits[i].dim : "(null)",
                                  (long long)splits[i].parts);
    if (ep < 1)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: expert parallelism %lld (expected >= 1)",
                              op->name, (long long)ep);
    *out = (loom_op_time){0, 0, LOOM_SRC_ROOFLINE};
    if (op->kind == LOOM_OP_RESHAPE || op->kind == LOOM_OP_TRANSPOSE) return LOOM_OK;

    moe_view mv = moe_of(g, op, op_id, splits, n_splits, ep);
    bool dispatcher = op->kind == LOOM_OP_MOE_DISPATCH || op->kind == LOOM_OP_MOE_COMBINE;
    shard_work w;
    loom_status s = shard_of(g, op, splits, n_splits, mv.on ? (double)ep : 1, &w, err);
    if (s) return s;

    if (m->db && n_splits <= LOOM_PROFILE_MAX_DIMS) {
        loom_dim div[LOOM_PROFILE_MAX_DIMS];
        for (int i = 0; i < n_splits; i++) {
            snprintf(div[i].name, sizeof div[i].name, "%s", splits[i].dim);
            div[i].size = splits[i].parts;
        }
        loom_profile_key key;
        loom_error ignore;
        double f, b;
        loom_time_source src;
        /* A key that cannot be formed (e.g. a dim name longer than a
         * loom_dim holds) simply is not in the db: fall back. */
        if (loom_profile_key_from_op(g, op_id, div, n_splits, &key, &ignore) == LOOM_OK &&
            loom_profile_db_lookup(m->db, key.op, key.sig, key.dtype, key.shape, key.n_dims, &f,
                                   &b, &src)) {
            /* a measured GEMM is the kernel alone: the expert bias's
             * eager kernels after it are priced as below */
            double bf, bb;
            unfused_bias_time(m, g, op, expert_groups(g, op, splits, n_splits, mv.on ? ep : 1),
                             w.out_bytes, &bf, &bb);
            *out = (loom_op_time){f + bf, b + bb, src};
            if (!dispatcher) busiest(&mv, out);
            return LOOM_OK;
        }
    }

    if (dispatcher && mv.on) return dispatcher_time(m, g, op, splits, n_splits, &mv, out, err);
    if (op->kind == LOOM_OP_MOE_ROUTE && op->n_in > 0) {
        router_time(m, g, op, &w, out);
        return LOOM_OK;
    }

    const loom_device *d = &m->cluster.gpu;
    const loom_calib *cal = &m->cal;
    double mem_f = loom_cost_memory_time_s(m, w.bytes), mem_b = 2 * mem_f;
    double cf = 0, cb = 0, bias_f = 0, bias_b = 0;   /* bias_*: separate kernels after it */
    int kf = 1, kb = 1;
    if (op->kind == LOOM_OP_EINSUM || op->kind == LOOM_OP_ATTENTION) {
        double peak = loom_device_peak_flops(d, w.dtype);
        if (!(peak > 0))
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                  "op %s: %s has no %s tensor cores (peak 0 FLOP/s)", op->name,
                                  d->name, loom_dtype_name(w.dtype));
        if (op->kind == LOOM_OP_EINSUM) {
            kb = op->n_in + op->n_w - (op->bias ? 1 : 0);
            if (kb < 1) kb = 1;
            bool fp8 = loom_te_fp8_gemm(g, op, w.dtype);
            if (fp8) peak = loom_device_peak_flops(d, LOOM_DTYPE_FP8);
            if (!(peak > 0))
                return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                      "op %s: %s has no fp8 tensor cores", op->name, d->name);
            /* experts: one grouped kernel over the local experts */
            double ng = expert_groups(g, op, splits, n_splits, mv.on ? ep : 1);
            cf = grouped_kernel_s(m, w.fwd_flops, ng, peak);
            cb = kb * grouped_kernel_s(m, w.bwd_flops / kb, ng, peak);
            unfused_bias_time(m, g, op, ng, w.out_bytes, &bias_f, &bias_b);
            if (fp8) {
                /* TE's cast-transpose kernels, memory-bound with amax fused
                 * (transformer_engine/common/transpose/cast_transpose.cu):
                 * forward reads the bf16 input (2 B/element) and writes its
                 * fp8 copy and fp8 transpose for wgrad (1 + 1 B), 2x its
                 * bf16 bytes; backward does the same for the output
                 * gradient. The fp8 weight copy is cast once per step
                 * (Megatron passes is_first_microbatch) and is not charged
                 * per micro-batch. One extra kernel each way, except where
                 * the norm before the GEMM writes the fp8 input itself or
                 * a GEMM before this one already cast the same input. */
                if (!fp8_cast_fused_in_norm(g, op) && !fp8_input_cast_before(g, op, op_id, w.dtype))
                    cf += loom_cost_memory_time_s(m, 2 * w.in_bytes) + cal->kernel_overhead_s;
                cb += loom_cost_memory_time_s(m, 2 * w.out_bytes) + cal->kernel_overhead_s;
            }
        } else {
            kb = 2;
            cf = attention_kernel_s(m, w.fwd_flops, peak);
            cb = attention_kernel_s(m, w.bwd_flops, peak);
            if (m->attn == LOOM_ATTN_FA2_UNPAD) {
                /* flash-attn's bert_padding around flash_attn_varlen_func
                 * (flash_attn/bert_padding.py, as llm-foundry's
                 * flash_attn_fn calls it for every batch, padded or not):
                 * unpad_input gathers q, k and v into packed rows
                 * (IndexFirstAxis: read + write each) and pad_input
                 * scatters the output into a zeroed [b·s] tensor
                 * (IndexPutFirstAxis: write zeros, read + write the rows):
                 * 2(|q| + |k| + |v|) + 3|o| in 5 kernels. Backward gathers
                 * the output gradient (2|o|) and scatters q's, k's and v's
                 * into zeroed tensors (3 each): 3(|q| + |k| + |v|) + 2|o|
                 * in 7. Plain ATen kernels: eager_mem_eff (calib.c). */
                double qkv = w.bytes - w.out_bytes, o = w.out_bytes;
                cf += eager_memory_time_s(m, 2 * qkv + 3 * o) + 5 * cal->kernel_overhead_s;
                cb += eager_memory_time_s(m, 3 * qkv + 2 * o) + 7 * cal->kernel_overhead_s;
            }
        }
    } else {
        double peak = d->vector_flops * cal->vector_eff;
        cf = peak > 0 ? w.fwd_flops / peak : 0;
        cb = peak > 0 ? w.bwd_flops / peak : 0;
        /* eager PyTorch: the op's chain of kernels, each a pass through HBM
         * (eager.h), on the elements of its output */
        loom_eager_chain ch;
        const loom_tensor *o0 = op->n_out > 0 ? loom_graph_tensor(g, op->out[0]) : NULL;
        double elem = o0 ? (double)loom_dtype_bytes(o0->dtype) : 0;
        if (m->elementwise == LOOM_ELEMENTWISE_EAGER && elem > 0 &&
            loom_eager_chain_of(op, elem, &ch)) {
            /* each kernel of the chain is a plain ATen streaming kernel */
            mem_f = eager_memory_time_s(m, ch.bytes_per_elem * w.out_bytes / elem + w.weight_bytes);
            mem_b = 2 * mem_f;
            kf = ch.kernels;
            kb = 2 * ch.kernels;
        } else if (m->elementwise == LOOM_ELEMENTWISE_FUSED && elem > 0 && unfused_yarn_rope(g, op)) {
            /* plain ATen kernels, as the eager chains above */
            mem_f = eager_memory_time_s(m, YARN_ROPE_FWD_PASSES * w.out_bytes);
            mem_b = eager_memory_time_s(m, YARN_ROPE_BWD_PASSES * w.out_bytes);
            kf = YARN_ROPE_FWD_KERNELS;
            kb = YARN_ROPE_BWD_KERNELS;
        }
    }
    out->fwd_s = maxd(cf, mem_f) + kf * cal->kernel_overhead_s + bias_f;
    out->bwd_s = maxd(cb, mem_b) + kb * cal->kernel_overhead_s + bias_b;
    busiest(&mv, out);
    return LOOM_OK;
}
