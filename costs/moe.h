/*
 * moe.h — what a mixture-of-experts layer costs in training beyond its
 * GEMMs, as Megatron-Core runs it with the alltoall token dispatcher
 * (megatron/core/transformer/moe/: token_dispatcher.py
 * MoEAlltoAllTokenDispatcher, experts.py TEGroupedMLP, router.py
 * TopKRouter; core_v0.14/0.15, the NeMo 25.09/25.11 containers). One model
 * for every caller: the roofline (compute.c) prices the kernels of the
 * router, the dispatch and the combine ops; the evaluator (eval.c) and the
 * planner's strategies (solver/strategy.c) price the collectives, each on its
 * own group.
 *
 * A rank routes its T tokens (its sequence-parallel share of the
 * micro-batch) to k of E experts; the expert-parallel group of P ranks
 * holds E/P experts each. Per MoE layer and micro-batch:
 *
 *   router     the gate GEMM (in the graph), then TE's fused kernels
 *              (--moe-router-fusion): top-k with its score function, the
 *              aux-loss scores, the aux loss; their two backward kernels.
 *              Each streams [T, E] scores.
 *   dispatch   permute     gather each token's hidden state into k slots
 *                          ordered by destination rank (TE moe_permute):
 *                          reads T·h, writes T·k·h
 *              all-gather  the per-expert token counts over the group
 *                          (the a2a split sizes; a host sync follows)
 *              all-to-all  the permuted tokens (T·k·h per rank) and their
 *                          routing probabilities (T·k fp32)
 *              sort        regroup the received tokens from source-rank
 *                          order to local-expert order (sort_chunks_by_idxs;
 *                          only with more than one local expert): reads and
 *                          writes them
 *              fp8 pad     with FP8 GEMMs, each expert's rows padded to a
 *                          multiple of 16 (TE Fp8Padding; a copy: under
 *                          dropless routing the counts are almost never
 *                          aligned)
 *   experts    the grouped GEMMs and the activation (in the graph)
 *   combine    the mirror: fp8 unpad, unsort, all-to-all back,
 *              unpermute (sum of each token's k outputs: reads T·k·h,
 *              writes T·h)
 * Backward runs each movement once more in reverse (a gather's backward is
 * the scatter of the same bytes, not twice them) and every all-to-all
 * again; the count all-gather has no backward. Megatron issues the
 * all-to-alls on the compute stream's critical path: nothing hides them
 * unless asked (--moe-shared-expert-overlap, EP a2a overlap), so they are
 * exposed here.
 *
 * Load imbalance. The slowest expert-parallel rank sets the pace of each
 * layer: the combine all-to-all waits for it. Routing is modelled as each
 * token picking k distinct experts uniformly at random — exactly what
 * Megatron's benchmark mode does (--moe-router-force-load-balancing draws
 * the logits from N(0, 1), moe_utils.py RandomSTE), and the balanced state
 * an aux loss drives routing towards (Fedus et al. 2022, Switch
 * Transformer §2.2, Eq. 4: minimised by uniform dispatch). A rank owning
 * m = E/P experts receives X ~ Hypergeometric(E, m, k) copies of each token:
 *     mean k·m/E = k/P,  var k·(m/E)·(1 - m/E)·(E - k)/(E - 1).
 * Over the N = P·T tokens of the group its load L_r is a sum of N
 * independent copies (normal by the CLT) with Σ_r L_r = N·k fixed, so the
 * loads are exchangeable with correlation -1/(P-1), which is the law of
 * μ + σ·sqrt(P/(P-1))·(Y_r - Ȳ) with Y_r iid N(0, 1). Hence
 *     E[max_r L_r] = μ + σ · sqrt(P/(P-1)) · e_P,
 * with e_P = E[max of P iid N(0,1)] (e_2 = 1/√π, e_3 = 3/(2√π), …). The
 * factor E[max L]/μ multiplies what the busiest rank does with its
 * received tokens (expert GEMMs, activation, sort, pad, the all-to-all's
 * receive side). For the benchmark batches (N·k/P ≈ 30k rows per rank) it
 * is about 1.01; for small batches and many ranks it grows.
 *
 * Units: bytes, seconds (none here: callers price bytes and kernels).
 */
#ifndef LOOM_MOE_H
#define LOOM_MOE_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/collective.h"

/* E[max of n iid standard normals] (0 for n <= 1). */
double loom_moe_expected_max_normal(int64_t n);

/* The busiest of `ep` expert-parallel ranks' routed rows over the mean,
 * when `tokens` tokens (the whole group's) each pick `topk` distinct of
 * `experts` experts uniformly (the model above). 1 when ep <= 1, when every
 * token reaches every expert (topk >= experts), or when the arguments are
 * not a routing (ep not dividing experts, tokens <= 0). */
double loom_moe_max_load_factor(int64_t experts, int64_t topk, int64_t ep, double tokens);

/* Hierarchical dispatch (HybridEP, DeepEP's normal kernels; DeepSeek-AI
 * 2024, DeepSeek-V3 report §3.2.2; DeepEP hybrid-ep branch,
 * docs/Hybrid-EP_Implementation.md "RDMA communication pattern"): a token
 * bound for experts in another NVLink domain crosses the network once, to
 * the GPU of the same local index there, which forwards it over NVLink to
 * each of its experts' GPUs in that domain. What crosses the network per
 * token is then one copy per other domain holding at least one of its k
 * experts, not one per expert. With `ep` ranks in domains of
 * `ranks_per_domain`, D = ep / ranks_per_domain domains of E/D experts
 * each, and k distinct experts drawn uniformly (the model above), a given
 * other domain holds none of them with probability
 *     C(E - E/D, k) / C(E, k) = prod_{i<k} (E - E/D - i) / (E - i),
 * so the expected copies are (D - 1) · (1 - that). Against the flat
 * all-to-all's k · (D - 1) / D: Qwen3-30B-A3B (E 128, k 8) on EP16 over two
 * 8-GPU nodes sends 1.0 copy across instead of 4. 0 when everything is in
 * one domain. */
double loom_moe_remote_domain_copies(int64_t experts, int64_t topk, int64_t ep,
                                     int64_t ranks_per_domain);

/* One rank's side of a dispatch or combine. */
typedef struct {
    double tokens;          /* T: tokens the rank routes (its own) */
    double row_bytes;       /* one token's hidden state, bytes (h · element size) */
    int64_t topk;           /* k */
    int64_t local_experts;  /* E / P on this rank */
    int64_t ep;             /* P: expert-parallel ranks exchanging tokens */
    double load_factor;     /* busiest rank's received rows / mean (>= 1) */
    bool fp8_padding;       /* TE FP8 grouped GEMMs: rows padded per expert */
} loom_moe_side;

/* HBM traffic and kernel launches of one pass. */
typedef struct {
    double bytes;
    int kernels;
} loom_moe_pass;

/* The permutation kernels of the dispatch (dispatch = true: permute, sort,
 * pad) or the combine (unpad, unsort, unpermute) op, forward and backward
 * (the table above). Routing probabilities travel with the dispatched
 * tokens: 4 bytes more per row. */
void loom_moe_permute_passes(const loom_moe_side *s, bool dispatch, loom_moe_pass *fwd,
                             loom_moe_pass *bwd);

/* The router's kernels after its gate GEMM, for `tokens` tokens over
 * `experts` experts: forward the fused top-k with its score function
 * (reads the bf16 logits, writes fp32 scores and a bool routing map),
 * backward its gradient; with an aux loss (the model's
 * router_aux_loss_coef / aux_loss_alpha) also the aux-loss scores, the
 * per-expert count, the loss, and their backward (moe.c itemises the
 * bytes). */
void loom_moe_router_passes(double tokens, int64_t experts, bool aux_loss, loom_moe_pass *fwd,
                            loom_moe_pass *bwd);

/* A collective of a dispatch or combine op over the expert-parallel group. */
typedef struct {
    loom_collective kind;
    double bytes;     /* the collective's buffer per GPU (collective.h) */
    bool backward;    /* in the backward pass (else the forward) */
} loom_moe_comm;

#define LOOM_MOE_MAX_COMM 5

/* The collectives of the dispatch (dispatch = true) or combine op of side
 * s with `experts` experts in all, busiest receiver's bytes (× load
 * factor): dispatch forward: the count all-gather (experts int64 from each
 * of the ep ranks), the tokens' and the probabilities' all-to-all; its
 * backward: both all-to-alls again. Combine: the tokens' all-to-all each
 * way. None when s->ep <= 1. Returns how many. */
int loom_moe_comm_ops(const loom_moe_side *s, bool dispatch, int64_t experts,
                      loom_moe_comm out[LOOM_MOE_MAX_COMM]);

#endif
