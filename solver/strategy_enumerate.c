/*
 * strategy_enumerate.c — strategy enumeration for the ops that choose their
 * own layout (einsum, embedding, attention, moe_dispatch, moe_combine) and
 * of followers over their main input (strategy.h). Each strategy is priced
 * by strategy.c; followers' spec derivation is in follow.c.
 *
 * Einsum (and embedding as the einsum "ids, [rows h] -> ids h"): a letter
 * assignment is (letter on axis 0 or none) × (letter on axis 1 or none);
 * the same letter on both axes is the "@01" split. For n letters that is
 * (n+1)² assignments before divisibility; each axis of partial sums then
 * picks all-reduce or a reduce-scatter target among the output letters left
 * unsplit. Output buffer B = |out| / (output splits before the reduction):
 *     all-reduce over A:            AR_A(B)                   bwd: none
 *     reduce-scatter over R:        RS_R(B)                   bwd: AG_R(B)
 *     both (R and A = P \ R):       RS_R(B) then AR_A(B/|R|)  bwd: AG_R(B)
 * (The backward all-reduce of a column-parallel input is on its edge:
 * in_partial, spec.h.)
 *
 * Units: seconds, bytes per GPU.
 */
#include "solver/strategy.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "costs/moe.h"
#include "solver/strategy_impl.h"

#define MAX_LETTERS 16
#define MAX_STRATEGIES 4096

/* Sets in_partial of every floating-point input from compute_axes. */
static void set_partials(const loom_strategy_ctx *c, const loom_op *o, loom_strategy *s)
{
    for (int k = 0; k < o->n_in; k++) {
        const loom_tensor *t = loom_graph_tensor(c->g, o->in[k]);
        s->in_partial[k] = loom_strategy_float(t->dtype)
                               ? (uint8_t)(s->compute_axes & ~loom_spec_axes(&s->in[k], t->ndim))
                               : 0;
    }
}

static void add_split(loom_strategy *s, const char *dim, int64_t parts)
{
    if (parts <= 1) return;
    for (int i = 0; i < s->n_splits; i++)
        if (!strcmp(s->splits[i].dim, dim)) return;
    if (s->n_splits < (int)(sizeof s->splits / sizeof s->splits[0]))
        s->splits[s->n_splits++] = (loom_dim_split){dim, parts};
}

/* Growable output list of strategies. */
typedef struct {
    loom_strategy *v;
    int32_t n, cap;
} strat_list;

static loom_strategy *push(strat_list *l)
{
    if (!loom_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) return NULL;
    loom_strategy *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    s->compute_scale = 1.0;
    return s;
}

/* ---- einsum and embedding -------------------------------------------------------- */

typedef struct {
    int n_opnd;                              /* inputs, then non-bias weights */
    int32_t tensor[2 * LOOM_MAX_IO];
    int8_t lt[2 * LOOM_MAX_IO][LOOM_MAX_DIMS];   /* letter index per operand dim */
    int out_nd;
    int8_t out_lt[LOOM_MAX_DIMS];
    int n_letters;
    int64_t size[MAX_LETTERS];
    const char *name[MAX_LETTERS];
    bool in_out[MAX_LETTERS], splittable[MAX_LETTERS];
} ein_desc;

static int letter_of(ein_desc *e, const loom_dim *d, char key, char *keys)
{
    for (int i = 0; i < e->n_letters; i++)
        if (keys[i] == key) return i;
    if (e->n_letters >= MAX_LETTERS) return -1;
    int i = e->n_letters++;
    keys[i] = key;
    e->size[i] = d->size;
    e->name[i] = d->name;
    e->splittable[i] = true;
    return i;
}

/* Letters come from the subscripts (einsum) or from dim names (embedding). */
static bool ein_describe(const loom_graph *g, const loom_op *o, ein_desc *e)
{
    memset(e, 0, sizeof *e);
    char keys[MAX_LETTERS];
    int nw = o->n_w - (o->bias ? 1 : 0);
    for (int k = 0; k < o->n_in; k++) e->tensor[e->n_opnd++] = o->in[k];
    for (int k = 0; k < nw; k++) e->tensor[e->n_opnd++] = o->w[k];
    const loom_tensor *y = loom_graph_tensor(g, o->out[0]);
    e->out_nd = y->ndim;
    if (o->kind == LOOM_OP_EINSUM) {
        const char *p = o->einsum;
        for (int k = 0; k < e->n_opnd; k++) {
            const loom_tensor *t = loom_graph_tensor(g, e->tensor[k]);
            for (int d = 0; d < t->ndim; d++)
                if ((e->lt[k][d] = (int8_t)letter_of(e, &t->dims[d], p[d], keys)) < 0) return false;
            p += t->ndim;
            p += (*p == ',') ? 1 : 2;   /* ',' or "->" */
        }
        for (int d = 0; d < y->ndim; d++)
            if ((e->out_lt[d] = (int8_t)letter_of(e, &y->dims[d], p[d], keys)) < 0) return false;
    } else {   /* embedding: letters by dim name; the table's row dim is contracted */
        char names[MAX_LETTERS][LOOM_DIM_NAME_MAX];
        int nn = 0;
        for (int k = 0; k <= e->n_opnd; k++) {
            const loom_tensor *t = loom_graph_tensor(g, k < e->n_opnd ? e->tensor[k] : o->out[0]);
            for (int d = 0; d < t->ndim; d++) {
                int i = 0;
                while (i < nn && strcmp(names[i], t->dims[d].name)) i++;
                if (i == nn) {
                    if (nn >= MAX_LETTERS) return false;
                    snprintf(names[nn++], LOOM_DIM_NAME_MAX, "%s", t->dims[d].name);
                }
                int l = letter_of(e, &t->dims[d], (char)('A' + i), keys);
                if (l < 0) return false;
                if (k < e->n_opnd) e->lt[k][d] = (int8_t)l;
                else e->out_lt[d] = (int8_t)l;
            }
        }
    }
    for (int d = 0; d < e->out_nd; d++) e->in_out[e->out_lt[d]] = true;
    /* A name carried by two letters cannot be split one letter at a time
     * (loom_cost_op_time splits by name). */
    for (int i = 0; i < e->n_letters; i++)
        for (int j = 0; j < e->n_letters; j++)
            if (i != j && !strcmp(e->name[i], e->name[j])) e->splittable[i] = false;
    return true;
}

/* Builds the strategy of one letter assignment (mask) and reduction choice
 * (rs: letter each partial axis reduce-scatters onto, -1 = all-reduce). */
static void ein_build(const loom_strategy_ctx *c, const loom_op *o, const ein_desc *e,
                      const uint8_t *mask, const int *rs, loom_strategy *s)
{
    const loom_mesh_ctx *m = &c->mesh;
    uint8_t outmask[MAX_LETTERS];
    memcpy(outmask, mask, sizeof outmask);
    unsigned partial = 0, rsax = 0, outax = 0;
    for (int l = 0; l < e->n_letters; l++) {
        if (!e->in_out[l]) partial |= mask[l];
        else outax |= mask[l];
        if (mask[l]) {
            s->compute_axes |= mask[l];
            add_split(s, e->name[l], loom_mesh_parts(m, mask[l]));
        }
    }
    for (int a = 0; a < 2; a++)
        if ((partial & (1u << a)) && rs[a] >= 0) {
            outmask[rs[a]] |= (uint8_t)(1u << a);
            rsax |= 1u << a;
        }
    for (int k = 0; k < e->n_opnd; k++) {
        const loom_tensor *t = loom_graph_tensor(c->g, e->tensor[k]);
        loom_spec *sp = k < o->n_in ? &s->in[k] : &s->w[k - o->n_in];
        for (int d = 0; d < t->ndim; d++) sp->ax[d] = mask[e->lt[k][d]];
    }
    for (int d = 0; d < e->out_nd; d++) s->out[0].ax[d] = outmask[e->out_lt[d]];
    if (o->bias) {   /* the bias covers the output's trailing dims */
        const loom_tensor *b = loom_graph_tensor(c->g, o->w[o->n_w - 1]);
        for (int d = 0; d < b->ndim; d++)
            s->w[o->n_w - 1].ax[d] = s->out[0].ax[e->out_nd - b->ndim + d];
    }
    const loom_tensor *y = loom_graph_tensor(c->g, o->out[0]);
    double B = (double)loom_tensor_bytes(y) / (double)loom_mesh_parts(m, outax);
    unsigned arax = partial & ~rsax;
    if (rsax) {
        loom_strategy_add_event(s->fwd, &s->n_fwd, LOOM_COLL_REDUCE_SCATTER, rsax, B);
        loom_strategy_add_event(s->bwd, &s->n_bwd, LOOM_COLL_ALL_GATHER, rsax, B);
    }
    if (arax)
        loom_strategy_add_event(s->fwd, &s->n_fwd, LOOM_COLL_ALL_REDUCE, arax,
                                B / (double)loom_mesh_parts(m, rsax));
    set_partials(c, o, s);
    s->name[0] = '\0';
    for (int l = 0; l < e->n_letters; l++)
        if (mask[l]) loom_strategy_name_add(s->name, sizeof s->name, e->name[l], mask[l]);
    if (arax) loom_strategy_name_add(s->name, sizeof s->name, "AR", arax);
    for (int a = 0; a < 2; a++)
        if (rsax & (1u << a)) {
            char tag[LOOM_DIM_NAME_MAX + 8];
            snprintf(tag, sizeof tag, "RS@%d>%s", a, e->name[rs[a]]);
            loom_strategy_name_add(s->name, sizeof s->name, tag, 0);
        }
    if (!s->name[0]) snprintf(s->name, sizeof s->name, "replicated");
}

/* Under expert TP 1 (strategy.h expert_fold), the letter of the experts e
 * of an expert GEMM (one with e and f or c) on a mesh with axis 1; else -1. */
static int ein_fold_expert(const loom_strategy_ctx *c, const ein_desc *e)
{
    if (!c->megatron_only || !c->expert_fold || c->mesh.mesh.n1 <= 1) return -1;
    int le = -1;
    bool expert = false;
    for (int k = 0; k < e->n_letters; k++) {
        if (!strcmp(e->name[k], "e")) le = k;
        expert |= !strcmp(e->name[k], "f") || !strcmp(e->name[k], "c");
    }
    return expert ? le : -1;
}

static bool letter_ok(const loom_strategy_ctx *c, const ein_desc *e, int l, unsigned mask,
                      bool compute)
{
    if (!mask) return true;
    loom_dim d = {.size = e->size[l]};
    snprintf(d.name, sizeof d.name, "%s", e->name[l]);
    if (!e->splittable[l] || !loom_spec_dim_splits(&d, loom_mesh_parts(&c->mesh, mask)))
        return false;
    if (c->megatron_only) {
        for (int a = 0; a < 2; a++)
            if ((mask & (1u << a)) && !loom_strategy_megatron_ok(c, e->name[l], a, compute)) return false;
        /* e splits only in expert GEMMs (those with f or c): the router's
         * einsum keeps every expert's logit on every rank */
        if (!strcmp(e->name[l], "e")) {
            bool expert = false;
            for (int k = 0; k < e->n_letters; k++)
                expert |= !strcmp(e->name[k], "f") || !strcmp(e->name[k], "c");
            if (!expert) return false;
        } else if ((mask & LOOM_AXIS1) && ein_fold_expert(c, e) >= 0)
            return false;   /* expert TP 1: axis 1 holds the experts */
    }
    return true;
}

static loom_status enum_einsum(const loom_strategy_ctx *c, const loom_op *o, strat_list *out,
                               loom_error *err)
{
    ein_desc e;
    if (!ein_describe(c->g, o, &e))
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "op %s: more than %d distinct dims",
                              o->name, MAX_LETTERS);
    int hi0 = c->mesh.mesh.n0 > 1 ? e.n_letters : 0, hi1 = c->mesh.mesh.n1 > 1 ? e.n_letters : 0;
    /* Megatron's space: every linear layer is column or row parallel (the
     * embedding vocab parallel), so a weight with a TP dim the axis can
     * split is split on axis 1; an einsum with no TP dim at all (the MoE
     * router) runs on the sequence-parallel shard of its tokens, s@1. */
    bool tp_free = true, must_tp = false;
    for (int l = 0; c->megatron_only && l < e.n_letters; l++) {
        if (!loom_strategy_megatron_tp_dim(e.name[l])) continue;
        tp_free = false;
        for (int k = o->n_in; k < e.n_opnd && !must_tp; k++)
            for (int d = 0; d < loom_graph_tensor(c->g, e.tensor[k])->ndim; d++)
                if (e.lt[k][d] == l && hi1 > 0 && letter_ok(c, &e, l, LOOM_AXIS1, true))
                    must_tp = true;
    }
    /* ... and with context parallelism every op works on its rank's chunk
     * of the sequence (tokens s, or their slots c in expert buffers): that
     * letter on axis 0 whenever it splits there */
    int must_cp = -1;
    for (int l = 0; c->megatron_cp && hi0 > 0 && l < e.n_letters && must_cp < 0; l++)
        if (e.in_out[l] && (!strcmp(e.name[l], "s") || !strcmp(e.name[l], "c")) &&
            letter_ok(c, &e, l, LOOM_AXIS0, true))
            must_cp = l;
    /* ... and without it the batch b on axis 0 (data parallel) */
    int must_dp = -1;
    for (int l = 0; hi0 > 0 && l < e.n_letters && must_dp < 0; l++)
        if (e.in_out[l] && !strcmp(e.name[l], "b") && loom_strategy_megatron_dp_forced(c, e.size[l]) &&
            letter_ok(c, &e, l, LOOM_AXIS0, true))
            must_dp = l;
    /* ... but a pinned EP > 1 puts an expert GEMM's experts on axis 0
     * (letter_ok admits e only in expert GEMMs): the tokens reach them by
     * the dispatcher's all-to-all, as Megatron's expert ranks do */
    for (int l = 0; c->megatron_only && c->expert_split > 0 && hi0 > 0 && l < e.n_letters; l++)
        if (!strcmp(e.name[l], "e") && letter_ok(c, &e, l, LOOM_AXIS0, true)) {
            must_cp = must_dp = l;
            break;
        }
    /* ... and under expert TP 1 an expert GEMM's experts on axis 1, in
     * place of its hidden f */
    int must_e1 = hi1 > 0 ? ein_fold_expert(c, &e) : -1;
    if (must_e1 >= 0) must_tp = false;
    for (int c0 = -1; c0 < hi0; c0++)
        for (int c1 = -1; c1 < hi1; c1++) {
            if (must_tp && (c1 < 0 || !loom_strategy_megatron_tp_dim(e.name[c1]))) continue;
            if (must_e1 >= 0 && c1 != must_e1) continue;
            if (must_cp >= 0 && c0 != must_cp) continue;
            if (must_dp >= 0 && c0 != must_dp) continue;
            uint8_t mask[MAX_LETTERS] = {0};
            if (c0 >= 0) mask[c0] |= LOOM_AXIS0;
            if (c1 >= 0) mask[c1] |= LOOM_AXIS1;
            bool ok = true;
            unsigned partial = 0;
            for (int l = 0; l < e.n_letters && ok; l++) {
                ok = letter_ok(c, &e, l, mask[l], !tp_free);
                if (!e.in_out[l]) partial |= mask[l];
            }
            if (!ok) continue;
            /* reduction targets per partial axis: -1 (all-reduce) or an
             * unsplit output letter; in Megatron's space also the sequence
             * already split on the other axis (context parallel: a
             * sequence-parallel reduce-scatter gives s@01) */
            int lo[2], hi[2];
            for (int a = 0; a < 2; a++) {
                lo[a] = -1;
                hi[a] = (partial & (1u << a)) ? e.n_letters : 0;
            }
            /* Megatron's sequence parallelism is one switch for the whole
             * model: a row-parallel op reduce-scatters onto the sequence
             * whenever it can (which the ILP would also pick without
             * overlap; with TP communication overlap an all-reduce can
             * look as cheap, but Megatron runs that overlap on SP only) */
            bool sp_forced = false;
            for (int l = 0; c->megatron_only && (partial & LOOM_AXIS1) && l < e.n_letters; l++)
                sp_forced |= e.in_out[l] && !strcmp(e.name[l], "s") && !(mask[l] & LOOM_AXIS1) &&
                             letter_ok(c, &e, l, mask[l] | LOOM_AXIS1, false);
            for (int r0 = lo[0]; r0 < hi[0]; r0++)
                for (int r1 = lo[1]; r1 < hi[1]; r1++) {
                    if (sp_forced && (r1 < 0 || strcmp(e.name[r1], "s"))) continue;
                    int rs[2] = {r0, r1};
                    uint8_t extra[MAX_LETTERS] = {0};
                    bool good = true;
                    for (int a = 0; a < 2 && good; a++) {
                        if (rs[a] < 0) continue;
                        good = e.in_out[rs[a]] &&
                               !(c->megatron_only ? mask[rs[a]] & (1u << a) : mask[rs[a]]);
                        if (good) extra[rs[a]] |= (uint8_t)(1u << a);
                    }
                    for (int l = 0; l < e.n_letters && good; l++)
                        good = !extra[l] || letter_ok(c, &e, l, mask[l] | extra[l], false);
                    if (!good) continue;
                    loom_strategy *s = push(out);
                    if (!s) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (strategies)");
                    ein_build(c, o, &e, mask, rs, s);
                }
        }
    return LOOM_OK;
}

/* ---- attention ------------------------------------------------------------------ */

enum { AT_NONE, AT_B, AT_HEADS, AT_SEQ, AT_COUNT };

static loom_status enum_attention(const loom_strategy_ctx *c, const loom_op *o, strat_list *out,
                                  loom_error *err)
{
    const loom_mesh_ctx *m = &c->mesh;
    const loom_tensor *q = loom_graph_tensor(c->g, o->in[0]), *k = loom_graph_tensor(c->g, o->in[1]);
    int hi0 = m->mesh.n0 > 1 ? AT_COUNT : 1, hi1 = m->mesh.n1 > 1 ? AT_COUNT : 1;
    for (int a0 = 0; a0 < hi0; a0++)
        for (int a1 = 0; a1 < hi1; a1++) {
            /* Megatron: batch (context parallel: the sequence, ring
             * attention, always when it divides) over axis 0, heads over
             * axis 1 (always, when they divide: attention follows the
             * column-parallel QKV) */
            int megatron_a0 = c->megatron_cp ? AT_SEQ : AT_B;
            if (c->megatron_only &&
                ((a0 != AT_NONE && a0 != megatron_a0) || (a1 != AT_NONE && a1 != AT_HEADS) ||
                 (a1 == AT_NONE && m->mesh.n1 > 1 && q->dims[2].size % m->mesh.n1 == 0) ||
                 (c->megatron_cp && a0 == AT_NONE && m->mesh.n0 > 1 &&
                  q->dims[1].size % m->mesh.n0 == 0) ||
                 (a0 == AT_NONE && loom_strategy_megatron_dp_forced(c, q->dims[0].size))))
                continue;
            unsigned mk[AT_COUNT] = {0};
            mk[a0] |= LOOM_AXIS0;
            mk[a1] |= LOOM_AXIS1;
            int64_t pb = loom_mesh_parts(m, mk[AT_B]), ph = loom_mesh_parts(m, mk[AT_HEADS]),
                    ps = loom_mesh_parts(m, mk[AT_SEQ]);
            if (q->dims[0].size % pb || q->dims[2].size % ph || q->dims[1].size % ps) continue;
            bool kv_split = k->dims[2].size % ph == 0;
            /* ring attention keeps K and V split along the sequence like Q */
            bool kv_seq = mk[AT_SEQ] && k->dims[1].size % ps == 0;
            loom_strategy *s = push(out);
            if (!s) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (strategies)");
            for (int i = 0; i < o->n_in && i < 3; i++) {
                s->in[i].ax[0] = (uint8_t)mk[AT_B];
                if (i == 0 || kv_seq) s->in[i].ax[1] = (uint8_t)mk[AT_SEQ];
                s->in[i].ax[2] = (uint8_t)(i == 0 || kv_split ? mk[AT_HEADS] : 0);
            }
            s->out[0] = s->in[0];
            s->compute_axes = (uint8_t)(mk[AT_B] | mk[AT_HEADS] | mk[AT_SEQ]);
            add_split(s, q->dims[0].name, pb);
            add_split(s, q->dims[2].name, ph);
            if (kv_split) add_split(s, k->dims[2].name, ph);
            /* Context parallel: ring attention with Megatron's load-balanced
             * chunks gives each rank 1/ps of the causal work, timed whole and
             * divided as costs/eval.c does; K and V go round the ring (cost in
             * loom_strategy_cost). Keys that cannot split stay whole. */
            s->compute_scale = 1.0 / (double)ps;
            if (kv_seq) s->ring_axes = (uint8_t)mk[AT_SEQ];
            set_partials(c, o, s);
            if (mk[AT_B]) loom_strategy_name_add(s->name, sizeof s->name, q->dims[0].name, mk[AT_B]);
            if (mk[AT_HEADS]) loom_strategy_name_add(s->name, sizeof s->name, q->dims[2].name, mk[AT_HEADS]);
            if (mk[AT_SEQ]) {
                loom_strategy_name_add(s->name, sizeof s->name, q->dims[1].name, mk[AT_SEQ]);
                loom_strategy_name_add(s->name, sizeof s->name, "cp", 0);
            }
            if (mk[AT_HEADS] && !kv_split) loom_strategy_name_add(s->name, sizeof s->name, "kv-replicated", 0);
            if (!s->name[0]) snprintf(s->name, sizeof s->name, "replicated");
        }
    return LOOM_OK;
}

/* ---- mixture-of-experts dispatch / combine -------------------------------------------- */

/* Per-axis modes. Tokens are [b, s, ...] on the token side, [e, c, h] on the
 * expert side. */
enum { MOE_NONE, MOE_H, MOE_TOK_B, MOE_TOK_S, MOE_EP_B, MOE_EP_S, MOE_EP_REP, MOE_COUNT };
static const char *const moe_mode_names[MOE_COUNT] = {"", "h", "tok", "tok", "ep", "ep", "ep-local"};

/* Megatron: expert parallelism over data-parallel ranks (axis 0; with
 * context parallelism over its ranks, whose tokens are sequence chunks);
 * on the tensor-parallel axis the tokens stay sequence-parallel and every
 * expert is split by its hidden f (loom_strategy_megatron_tp_dim). */
static bool moe_megatron_ok(const loom_strategy_ctx *c, int mode, int axis)
{
    /* experts spanning replicas, or a pinned EP > 1: expert parallel over
     * axis 0; a pinned EP 1: never */
    if (axis == 0 && (c->mesh.ep_span > 1 || c->expert_split > 0))
        return mode == MOE_EP_B || mode == MOE_EP_S;
    if (c->expert_split < 0 && (mode == MOE_EP_B || mode == MOE_EP_S || mode == MOE_EP_REP) &&
        !(c->expert_fold && axis == 1))
        return false;
    if (axis == 0 && c->megatron_cp) return mode == MOE_NONE || mode == MOE_TOK_S || mode == MOE_EP_S;
    if (axis == 0) return mode == MOE_NONE || mode == MOE_TOK_B || mode == MOE_EP_B;
    /* expert TP 1: each TP rank dispatches its sequence-parallel tokens to
     * experts over the TP ranks too (the all-to-all over both axes) */
    if (c->expert_fold) return mode == MOE_EP_S;
    return mode == MOE_NONE || mode == MOE_TOK_S;
}

static loom_status enum_moe(const loom_strategy_ctx *c, const loom_op *o, strat_list *out,
                            loom_error *err)
{
    const loom_mesh_ctx *m = &c->mesh;
    bool dispatch = o->kind == LOOM_OP_MOE_DISPATCH;
    /* token side tensor [b, s, h] and expert side [e, c, h] */
    const loom_tensor *tok = loom_graph_tensor(c->g, dispatch ? o->in[0] : o->out[0]);
    const loom_tensor *ex = loom_graph_tensor(c->g, dispatch ? o->out[0] : o->in[0]);
    if (tok->ndim != 3 || ex->ndim != 3)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "op %s: expected tokens [b, s, h] and expert buffers [e, c, h]", o->name);
    int hi0 = m->mesh.n0 > 1 ? MOE_COUNT : 1, hi1 = m->mesh.n1 > 1 ? MOE_COUNT : 1;
    for (int a0 = 0; a0 < hi0; a0++)
        for (int a1 = 0; a1 < hi1; a1++) {
            if (a0 == a1 && a0 == MOE_EP_REP) continue;
            if (c->megatron_only && (!moe_megatron_ok(c, a0, 0) || !moe_megatron_ok(c, a1, 1)))
                continue;
            if (a0 == MOE_NONE && loom_strategy_megatron_dp_forced(c, tok->dims[0].size)) continue;
            loom_spec ts, es;   /* token side, expert side */
            memset(&ts, 0, sizeof ts);
            memset(&es, 0, sizeof es);
            unsigned a2a = 0, local = 0;
            int mode[2] = {a0, a1};
            for (int a = 0; a < 2; a++) {
                uint8_t bit = (uint8_t)(1u << a);
                switch (mode[a]) {
                case MOE_H: ts.ax[2] |= bit, es.ax[2] |= bit; break;
                case MOE_TOK_B: ts.ax[0] |= bit, es.ax[1] |= bit; break;
                case MOE_TOK_S: ts.ax[1] |= bit, es.ax[1] |= bit; break;
                case MOE_EP_B: ts.ax[0] |= bit, es.ax[0] |= bit, a2a |= bit; break;
                case MOE_EP_S: ts.ax[1] |= bit, es.ax[0] |= bit, a2a |= bit; break;
                case MOE_EP_REP: es.ax[0] |= bit, local |= bit; break;
                default: break;
                }
            }
            if (!loom_spec_valid(&ts, tok, m) || !loom_spec_valid(&es, ex, m)) continue;
            /* experts over axis 0 and the ep_span replicas beside the
             * mesh: the tokens go round the wider group (spec.h) */
            if (a2a == LOOM_AXIS0 && m->ep_span > 1) {
                if (ex->dims[0].size % (m->mesh.n0 * m->ep_span)) continue;
                a2a = LOOM_AXIS0_EP_SPAN;
            } else if (a2a == LOOM_AXES_BOTH && m->ep_span > 1) {   /* expert TP 1 too */
                if (ex->dims[0].size % (m->mesh.n0 * m->mesh.n1 * m->ep_span)) continue;
                a2a = LOOM_AXIS0_EP_SPAN | LOOM_AXIS1;
            }
            loom_strategy *s = push(out);
            if (!s) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (strategies)");
            /* routing tensors [b, s, topk] follow the token side's b and s */
            loom_spec rs;
            memset(&rs, 0, sizeof rs);
            rs.ax[0] = ts.ax[0], rs.ax[1] = ts.ax[1];
            if (dispatch) {
                s->in[0] = ts, s->out[0] = es;
                for (int k = 1; k < o->n_in; k++) s->in[k] = rs;
            } else {
                s->in[0] = es, s->out[0] = ts;
                for (int k = 1; k < o->n_in; k++) s->in[k] = rs;
            }
            s->compute_axes = (uint8_t)(loom_spec_axes(&ts, 3) | loom_spec_axes(&es, 3));
            for (int d = 0; d < 3; d++) {
                if (ts.ax[d]) add_split(s, tok->dims[d].name, loom_mesh_parts(m, ts.ax[d]));
                if (es.ax[d]) add_split(s, ex->dims[d].name, loom_mesh_parts(m, es.ax[d]));
            }
            /* Expert parallel from split tokens: Megatron's alltoall
             * dispatcher over the axis (costs/moe.h: the counts, the
             * tokens and their probabilities out, the tokens back; each
             * again in backward), the busiest rank's share received. */
            if (a2a) {
                int64_t ranks = loom_mesh_parts(m, a2a), experts = ex->dims[0].size;
                double row = (double)loom_dtype_bytes(tok->dtype) * (double)tok->dims[2].size /
                             (double)loom_mesh_parts(m, ts.ax[2]);
                double tokens = loom_spec_bytes(&ts, tok, m) / row;
                int64_t k = o->topk > 0 ? o->topk : 1;
                loom_moe_side side = {.tokens = tokens, .row_bytes = row, .topk = k,
                                      .local_experts = experts /
                                                       (loom_mesh_parts(m, es.ax[0]) *
                                                        (a2a & LOOM_AXIS0_EP_SPAN ? m->ep_span : 1)),
                                      .ep = ranks,
                                      .load_factor = loom_moe_max_load_factor(
                                          experts, k, ranks, tokens * (double)ranks)};
                loom_moe_comm ops[LOOM_MOE_MAX_COMM];
                int n_ops = loom_moe_comm_ops(&side, dispatch, experts, ops);
                for (int i = 0; i < n_ops; i++) {
                    if (ops[i].backward)
                        loom_strategy_add_event(s->bwd, &s->n_bwd, ops[i].kind, a2a, ops[i].bytes);
                    else
                        loom_strategy_add_event(s->fwd, &s->n_fwd, ops[i].kind, a2a, ops[i].bytes);
                }
            }
            /* Combine from experts to replicated tokens: each rank holds the
             * contributions of its experts, summed over the axis. */
            if (local && !dispatch)
                loom_strategy_add_event(s->fwd, &s->n_fwd, LOOM_COLL_ALL_REDUCE, local,
                                        loom_spec_bytes(&ts, tok, m));
            set_partials(c, o, s);
            for (int a = 0; a < 2; a++)
                if (mode[a] != MOE_NONE) {
                    char tag[24];
                    snprintf(tag, sizeof tag, "%s@%d", moe_mode_names[mode[a]], a);
                    loom_strategy_name_add(s->name, sizeof s->name, tag, 0);
                }
            if (!s->name[0]) snprintf(s->name, sizeof s->name, "replicated");
        }
    return LOOM_OK;
}

/* ---- followers as roots and the dispatcher ------------------------------------------- */

static loom_status enum_follower(const loom_strategy_ctx *c, int32_t op, int main_in,
                                 strat_list *out, loom_error *err)
{
    const loom_op *o = loom_graph_op(c->g, op);
    if (main_in < 0) main_in = loom_strategy_default_main(c->g, op);
    if (main_in < 0) main_in = 0;
    const loom_tensor *t = loom_graph_tensor(c->g, o->in[main_in]);
    loom_spec specs[64];
    int n = loom_strategy_tensor_specs(c, t, specs, 64);
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++) {
        loom_strategy *s = push(out);
        if (!s) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (strategies)");
        loom_status st = loom_strategy_follow(c, op, main_in, &specs[i], s, err);
        if (st) return st;
    }
    return LOOM_OK;
}

/* Drops strategies whose every spec, partial and cost equals an earlier one's
 * (the same layout reached twice); keeps the order otherwise. */
static void dedupe(const loom_op *o, strat_list *l)
{
    int32_t w = 0;
    for (int32_t i = 0; i < l->n; i++) {
        bool dup = false;
        for (int32_t j = 0; j < w && !dup; j++) {
            const loom_strategy *a = &l->v[i], *b = &l->v[j];
            dup = !memcmp(a->in, b->in, sizeof a->in) && !memcmp(a->w, b->w, sizeof a->w) &&
                  !memcmp(a->out, b->out, sizeof a->out) &&
                  !memcmp(a->in_partial, b->in_partial, sizeof a->in_partial) &&
                  a->compute_s == b->compute_s && a->comm_s == b->comm_s &&
                  a->grad_sync_s == b->grad_sync_s && a->act_bytes == b->act_bytes;
        }
        (void)o;
        if (!dup) l->v[w++] = l->v[i];
    }
    l->n = w;
}

loom_status loom_strategy_enumerate(const loom_strategy_ctx *c, int32_t op, int main_in,
                                    loom_strategy **out, int32_t *n, loom_error *err)
{
    *out = NULL;
    *n = 0;
    const loom_op *o = loom_graph_op(c->g, op);
    strat_list l = {0};
    loom_status st = LOOM_OK;
    switch (o->kind) {
    case LOOM_OP_EINSUM:
    case LOOM_OP_EMBEDDING: st = enum_einsum(c, o, &l, err); break;
    case LOOM_OP_ATTENTION: st = enum_attention(c, o, &l, err); break;
    case LOOM_OP_MOE_DISPATCH:
    case LOOM_OP_MOE_COMBINE: st = enum_moe(c, o, &l, err); break;
    default:
        if (loom_strategy_is_follower(o->kind)) st = enum_follower(c, op, main_in, &l, err);
        else {
            loom_strategy *s = push(&l);   /* unknown kind: replicated only */
            if (!s) st = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (strategies)");
            else snprintf(s->name, sizeof s->name, "replicated");
        }
    }
    if (!st && l.n > MAX_STRATEGIES)
        st = loom_error_set(err, LOOM_ERR_UNSUPPORTED, "op %s: %d strategies (at most %d)",
                            o->name, l.n, MAX_STRATEGIES);
    for (int32_t i = 0; !st && i < l.n; i++)
        if (!loom_strategy_is_follower(o->kind)) st = loom_strategy_cost(c, op, &l.v[i], err);
    if (st) {
        free(l.v);
        return st;
    }
    dedupe(o, &l);
    *out = l.v;
    *n = l.n;
    return LOOM_OK;
}
