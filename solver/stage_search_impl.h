/*
 * stage_search_impl.h — internals shared by stage_costs.c (per-layer cost
 * tables from the ILP), stage_eval.c (exact evaluation of a configuration)
 * and the search loops: stage_search.c (the driver), stage_search_point.c
 * (one point's meshes and strategy spaces), stage_search_dp.c (the stage
 * DPs), stage_search_megatron.c (Megatron's splits) and stage_search_keep.c
 * (what the search keeps). Not installed API.
 */
#ifndef LOOM_STAGE_SEARCH_IMPL_H
#define LOOM_STAGE_SEARCH_IMPL_H

#include "costs/profile_db.h"
#include "solver/stage_search.h"

#define LOOM_SEARCH_MAX_GRAPHS 16

/* The ILP amortises a mesh's gradient sync over this many micro-batches when
 * it picks strategies (one value, so that every configuration shares the
 * solves); the exact count is applied wherever the table is used. */
#define LOOM_SEARCH_ILP_MICRO_BATCHES 8

#define LOOM_SEARCH_MAX_LOGICAL 8   /* logical shapes per sub-mesh */
#define LOOM_SEARCH_MAX_SPACES 23   /* strategy spaces per logical mesh: full, Megatron data
                                       or context parallel on axis 0, each of those two
                                       with expert parallelism across 2 .. 256 replicas or
                                       with expert TP 1 (EP over axis 1, or both axes) */
#define LOOM_SEARCH_MAX_SHAPES (LOOM_SEARCH_MAX_SPACES * LOOM_SEARCH_MAX_LOGICAL)

/* A stage's strategy space: the ILP's unrestricted one, or Megatron's
 * (tensor parallel on axis 1; axis 0 data or context parallel; with or
 * without TP communication overlap). */
typedef struct {
    bool megatron, cp, tp_overlap;
    int64_t ep_span;   /* Megatron's: expert parallelism over axis 0 × this many
                          replicas (spec.h loom_mesh_ctx.ep_span); 0 or 1: the mesh */
    int experts;       /* Megatron's, under a pinned EP: 1 experts split over axis 0,
                          -1 never split, 0 the ILP's choice (strategy.h expert_split) */
    bool expert_fold;  /* Megatron's: expert TP 1, the experts over axis 1 too
                          (strategy.h expert_fold) */
} loom_search_space;

static inline int64_t loom_search_space_ep_span(loom_search_space sp)
{
    return sp.megatron && sp.ep_span > 1 ? sp.ep_span : 1;
}

static inline loom_search_space loom_search_stage_space(const loom_search_stage *st)
{
    return (loom_search_space){st->megatron, st->megatron && st->context_parallel,
                               st->megatron && st->tp_comm_overlap,
                               st->megatron && st->ep_span > 1 ? st->ep_span : 1,
                               st->megatron ? st->expert_split : 0,
                               st->megatron && st->expert_fold};
}

static inline bool loom_search_space_eq(loom_search_space a, loom_search_space b)
{
    return a.megatron == b.megatron && a.cp == b.cp && a.tp_overlap == b.tp_overlap &&
           loom_search_space_ep_span(a) == loom_search_space_ep_span(b) &&
           (a.megatron ? a.experts : 0) == (b.megatron ? b.experts : 0) &&
           (a.megatron && a.expert_fold) == (b.megatron && b.expert_fold);
}

/* Per-layer costs of graph(b) on one logical mesh, from one ILP run over the
 * whole model; arrays indexed by layer slot. */
typedef struct {
    int64_t b, n0, n1;
    bool tiled;              /* priced on the tile view (its groups may differ) */
    loom_search_space space;
    int32_t n;
    bool ok;                 /* the ILP found strategies */
    double *time_s;          /* one micro-batch: compute + comm (fwd, + bwd when training) */
    double *rc_s;            /* forward rerun of a block under full recompute */
    double *sel_s;           /* forward rerun of the attention core's ops under selective
                                recompute (those with an s x t operand, as loom eval) */
    double *sync_s;          /* per step: gradient sync over the mesh's axes that are not
                                data parallel (strategy.h other_sync_s) */
    double *dp_params;       /* [4 per layer]: parameters per GPU by the data-parallel mesh
                                axes their gradient is partial over (strategy.h), synced
                                with the replicas in one group */
    double *kv_read_s;       /* inference: streaming the KV cache of one micro-batch */
    int64_t *params;         /* per GPU */
    int64_t *params_local;   /* per GPU, divided by the data-parallel copies (strategy.h) */
    int64_t *act_bytes;      /* saved activations of one micro-batch, per GPU */
    int64_t *input_bytes;    /* the block's input on one GPU (what full recompute keeps) */
    int64_t *core_bytes;     /* of act_bytes, the attention core's (what selective frees) */
    int64_t *kv_per_seq;     /* inference: KV cache bytes per sequence, per GPU */
    int64_t max_block_act;   /* recompute's working set */
    int64_t max_core;        /* selective recompute's working set */
} loom_layer_tab;

struct loom_search {
    loom_problem pb;                 /* what to plan */
    loom_search_options opt;         /* how */
    const loom_cluster *c;           /* the layout being searched: the problem's cluster, */
    const loom_cost_model *cm;       /* or its tile view (tiled), and its cost model */
    bool tiled;
    loom_cluster tile;               /* the tile view (cluster.h), when has_tile */
    loom_cost_model *tile_cm;        /* a view of pb.cm on it (owned) */
    bool has_tile;
    bool have_lay[2];                /* the best plan of each layout (0 all GPUs, 1 tile) */
    double lay_score[2], lay_step[2];
    loom_search_config lay_best[2];
    bool track_groups;               /* nodes of more than 8 GPUs: ... */
    bool have_grp[2];                /* ... the best plan whose largest TP/EP group is */
    double grp_score[2], grp_step[2];   /* at most 8 GPUs [0], or more [1] */
    loom_search_config grp_best[2];
    const loom_calib *cal;
    loom_intra_cache *cache;
    loom_stage_workspace *ws;        /* DP buffers reused across solves */
    int64_t context;                 /* inference: tokens cached per sequence */
    int64_t seq_tokens;              /* training: tokens per sequence */
    int ng;
    int64_t graph_b[LOOM_SEARCH_MAX_GRAPHS];
    loom_graph *graphs[LOOM_SEARCH_MAX_GRAPHS];
    uint64_t *sigs[LOOM_SEARCH_MAX_GRAPHS];   /* layer signatures of each graph */
    loom_layer_tab **tabs;           /* each allocated alone: pointers stay valid */
    int32_t n_tabs, cap_tabs;
    loom_profile_key *keys;
    int32_t n_keys, cap_keys;
    loom_search_result res;
    bool have_best;
    int64_t pinned_candidates;       /* configurations with the pinned sizes priced, exactly
                                        or by a DP or estimate, fitting or not */
    bool state_pruned;               /* some replica size could not even hold the model state */
    bool want_measured;              /* eval: also look up each op's time source */
    double t_start;
};

/* ---- the search loops (stage_search*.c) ------------------------------------------ */

/* One (replica size, replicas, micro-batch) point of the search and what
 * stage_search_point.c prepared for it: sub-meshes, and on each its
 * (logical shape, strategy space) entries with their layer tables. */
typedef struct {
    int64_t D, dp, b, M, seqs;
    int zs[3], nz;                       /* ZeRO stages on offer whose model state fits */
    int zero;                            /* the one being tried */
    int32_t nm;                          /* sub-meshes */
    loom_submesh sub[LOOM_STAGE_MAX_MESHES];
    int32_t nshape[LOOM_STAGE_MAX_MESHES];   /* (logical shape, strategy space) entries */
    int64_t shape[LOOM_STAGE_MAX_MESHES][LOOM_SEARCH_MAX_SHAPES][2];
    loom_search_space space[LOOM_STAGE_MAX_MESHES][LOOM_SEARCH_MAX_SHAPES];
    const loom_layer_tab *tab[LOOM_STAGE_MAX_MESHES][LOOM_SEARCH_MAX_SHAPES];
    int32_t n_rc;                        /* recompute options: none (and full, and selective
                                            with unfused attention): LOOM_SEARCH_RC_* */
    int32_t n_layers;
    const loom_graph *g;
} loom_search_point;

/* Recompute options: a DP option code's rc (< n_rc) is one of the first
 * three; Megatron's splits also weigh partial recompute
 * (loom_search_try_interleaved). */
enum { LOOM_SEARCH_RC_NONE, LOOM_SEARCH_RC_FULL, LOOM_SEARCH_RC_SELECTIVE, LOOM_SEARCH_RC_PARTIAL };

/* The kinds of strategy space loom_search_try_interleaved weighs apart. */
enum {
    LOOM_SEARCH_KIND_FULL,
    LOOM_SEARCH_KIND_MEGATRON_DP,
    LOOM_SEARCH_KIND_MEGATRON_CP,
    LOOM_SEARCH_KIND_COUNT
};

/* stage_search.c. Whether to stop now: the caller's stop flag, or the time
 * or work limit once there is a plan (sets res.stopped / res.timed_out). */
bool loom_search_stop_now(loom_search *s);
/* A replica of D GPUs is a valid pipeline block: whole nodes, or a power of
 * two dividing a node of g GPUs. */
bool loom_search_valid_replica(int64_t D, int64_t g);

/* stage_search_point.c: every candidate of point pt (pt->D, dp, b, M, seqs,
 * zs, nz set; the rest is filled here). */
loom_status loom_search_try_point(loom_search *s, loom_search_point *pt, loom_error *err);

/* stage_search_dp.c. Seconds per step per parameter of the data-parallel
 * sync of shape entry si on sub-mesh m, by the mesh axes (bits) a weight's
 * gradient is partial over. */
void loom_search_sync_rates(const loom_search *s, const loom_search_point *pt, int32_t m,
                            int32_t si, double rate[4]);
/* The stage setting of recompute option rc (LOOM_SEARCH_RC_*). */
loom_recompute loom_search_rc_setting(int rc);
/* Costs of layer l under option (sub-mesh m, shape entry si, recompute rc:
 * NONE, FULL or SELECTIVE) into c; rate: loom_search_sync_rates of the entry. */
void loom_search_layer_cost(loom_search *s, const loom_search_point *pt, int32_t l, int32_t m,
                            int32_t si, int rc, const double rate[4], loom_stage_cost *c);
/* Sets a stage's strategy-space fields from sp. */
void loom_search_set_space(loom_search_stage *st, loom_search_space sp);
/* The stage DPs over sub-meshes meshes[0..nm) and layer clusters
 * first[0..K], each plan evaluated exactly and considered. */
loom_status loom_search_try_dps(loom_search *s, const loom_search_point *pt,
                                const int32_t *meshes, int32_t nm, const int32_t *first,
                                int32_t K, loom_error *err);

/* stage_search_megatron.c: Megatron's splits of pp ranks on sub-mesh m
 * with v chunks each, over the options of one kind of strategy space
 * (LOOM_SEARCH_KIND_*); the best that fits is evaluated and considered. */
loom_status loom_search_try_interleaved(loom_search *s, const loom_search_point *pt, int32_t m,
                                        int64_t v, int kind, loom_error *err);

/* stage_search_keep.c. Keeps cfg if it fits (and has the pins) and beats
 * the best; takes ownership of ev either way. */
void loom_search_consider(loom_search *s, const loom_search_config *cfg,
                          loom_search_eval_result *ev);
/* Whether the options pin any size; the pinned sizes as text ("tp 8, ep 4"). */
bool loom_search_pins_given(const loom_search_options *o);
void loom_search_pins_text(const loom_search_options *o, char *dst, size_t cap);

/* ---- the costs (stage_costs.c, stage_eval.c) and the handle (stage_search.c) ------- */

/* stage_costs.c, for stage_eval.c. The parts mesh axes `axes` (bits) of m
 * cut a dim into. */
int64_t loom_search_axes_parts(unsigned axes, loom_mesh_shape m);
/* Per dim name, the largest split any operand spec of op gives it (at most
 * cap names into div); returns the count. */
int loom_search_op_splits(const loom_intra_result *r, const loom_graph *g, int32_t op,
                          loom_mesh_shape m, loom_dim *div, int cap);
/* Whether op is a matrix multiply (einsum or attention: its FLOPs count). */
bool loom_search_is_matmul(const loom_op *o);
/* The ILP options of the search in strategy space `space`. */
void loom_search_intra_opts(const loom_search *s, loom_search_space space,
                            loom_intra_opts *o);

/* stage_eval.c. The largest tensor- or expert-parallel group of configuration cfg (ev its
 * evaluation, g the graph of cfg->mbs): over its stages, the GPUs the
 * dense weights split over, or the experts, read off the chosen specs by
 * the rule loom_plan_stage_roles names roles with (planner/plan). */
int64_t loom_search_largest_group(const loom_graph *g, const loom_search_config *cfg,
                                  const loom_search_eval_result *ev);

/* Whether every stage of cfg that holds experts splits them over ep GPUs
 * (read off the chosen specs like loom_search_largest_group). */
bool loom_search_ep_is(const loom_graph *g, const loom_search_config *cfg,
                       const loom_search_eval_result *ev, int64_t ep);

/* Makes the search price the given layout (s->c, s->cm, s->tiled); returns
 * the one it was on. */
bool loom_search_use_layout(loom_search *s, bool tiled);

/* Layer signatures of a graph the search loaded (NULL for another graph). */
const uint64_t *loom_search_sigs(const loom_search *s, const loom_graph *g);

/* The table of graph(b) on mesh (n0, n1) in a strategy space (built on
 * first use). */
loom_status loom_search_layer_tab(loom_search *s, int64_t b, loom_mesh_shape mesh,
                                  loom_search_space space, const loom_layer_tab **out,
                                  loom_error *err);
void loom_search_tabs_free(loom_search *s);

/* ZeRO stage a configuration gets by default: the options', else 1 for
 * training (Megatron's distributed optimizer), 0 for inference. */
int loom_search_zero(const loom_search *s);
/* ZeRO stages the search tries with dp replicas, in order (ties keep the
 * first): the options' alone, or when it leaves the choice to the search
 * 1, 2, 3 for training with replicas; 0 otherwise. Returns the count. */
int loom_search_zero_options(const loom_search *s, int64_t dp, int out[3]);
/* The data-parallel group of a weight whose gradient is partial over mesh
 * axes `axes` (bit 0, bit 1) of a stage on `mesh` whose first GPU is
 * first_gpu, with dp replicas replica_stride GPUs apart: its copies in the
 * mesh times the replicas, ONE group as Megatron's data-parallel group
 * spans dp × cp ranks. Ranks per node are counted in first_gpu's node
 * (the layouts of loom_search_layout make it representative). */
loom_group loom_search_dp_group(const loom_search *s, loom_mesh_shape mesh, unsigned axes,
                                int64_t dp, int64_t replica_stride, int64_t first_gpu);
/* The data-parallel group of a stage's weights partial over mesh axes
 * `axes`: loom_search_dp_group, but for the experts of a space whose
 * expert parallelism spans replicas (their copies are dp / ep_span
 * replicas, ep_span · replica_stride apart). */
loom_group loom_search_weight_dp_group(const loom_search *s, loom_mesh_shape mesh, unsigned axes,
                                       int64_t dp, int64_t replica_stride, int64_t first_gpu,
                                       loom_search_space space);
/* Seconds per step to synchronise the gradients of n_params parameters
 * (per GPU) over group grp under ZeRO stage `zero`, with M micro-batches
 * per step, for a stage of `blocks` transformer blocks (ZeRO-3 gathers and
 * scatters once per block) with or without full recompute:
 * loom_dp_sync_time_s under Megatron's rule, the same function loom eval
 * calls. The table estimates pass 1 block. */
double loom_search_dp_sync_s(const loom_search *s, double n_params, loom_group grp, int zero,
                             int64_t micro_batches, int64_t blocks, bool full_recompute);
/* Of that sync, the part ZeRO-3's per-block prefetch cannot hide
 * (loom_dp_sync_unhidden_s; 0 below ZeRO-3). */
double loom_search_dp_unhidden_s(const loom_search *s, double n_params, loom_group grp, int zero,
                                 int64_t micro_batches, int64_t blocks, bool full_recompute);
/* Model-state bytes per GPU for n_params (n_local once shared among the
 * mesh's copies, costs/memory.h) under ZeRO stage `zero` over dp replicas. */
int64_t loom_search_state_bytes(const loom_search *s, int64_t n_params, int64_t n_local,
                                int64_t dp, int zero);

#endif
