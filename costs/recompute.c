/*
 * recompute.c — Megatron's selective recomputation by module (recompute.h).
 */
#include "costs/recompute.h"

#include <stdio.h>
#include <string.h>

#include "costs/memory.h"

static const char *const names[] = {"core_attn", "layernorm",  "moe_act",       "mla_up_proj",
                                    "mlp",       "moe",        "shared_experts"};
#define N_MODULES (sizeof names / sizeof names[0])

const char *loom_recompute_module_name(uint32_t bit)
{
    for (size_t i = 0; i < N_MODULES; i++)
        if (bit == 1u << i) return names[i];
    return "?";
}

bool loom_recompute_modules_parse(const char *list, uint32_t *bits, char *bad, size_t bad_len)
{
    *bits = 0;
    const char *c = list;
    while (*c) {
        size_t n = strcspn(c, ", ");
        if (n > 0) {
            size_t i = 0;
            while (i < N_MODULES && !(strlen(names[i]) == n && strncmp(c, names[i], n) == 0)) i++;
            if (i == N_MODULES) {
                if (bad) snprintf(bad, bad_len, "%.*s", (int)n, c);
                return false;
            }
            *bits |= 1u << i;
        }
        c += n;
        c += strspn(c, ", ");
    }
    if (!*bits && bad) snprintf(bad, bad_len, "(an empty list)");
    return *bits != 0;
}

void loom_recompute_modules_format(uint32_t bits, char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = '\0';
    for (size_t i = 0; i < N_MODULES; i++)
        if (bits & 1u << i && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", names[i]);
}

uint32_t loom_recompute_selected(const loom_parallel *p)
{
    if (p->recompute != LOOM_RECOMPUTE_SELECTIVE) return 0;
    return p->recompute_modules ? p->recompute_modules : LOOM_RC_CORE_ATTN;
}

/* ---- which module an op belongs to ------------------------------------------------------ */

static bool has_dim(const loom_tensor *t, const char *name)
{
    return loom_tensor_dim_index(t, name) >= 0;
}

/* Korthikanti et al.'s attention core: tensors with both a query (s) and a
 * key (t) sequence dim (scores, probabilities, their dropout). */
static bool attention_core(const loom_tensor *t)
{
    return has_dim(t, "s") && has_dim(t, "t");
}

static bool core_op(const loom_graph *g, const loom_op *op)
{
    for (int k = 0; k < op->n_in + op->n_out; k++)
        if (attention_core(loom_graph_tensor(g, k < op->n_in ? op->in[k] : op->out[k - op->n_in])))
            return true;
    return false;
}

static bool activation(const loom_op *op)
{
    static const char *const fns[] = {"swiglu", "silu", "gelu", "geglu", "relu"};
    if (op->kind != LOOM_OP_ELEMENTWISE) return false;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (strcmp(op->fn, fns[i]) == 0) return true;
    return false;
}

/* A norm reading the residual stream: a block's input (produced in an
 * earlier layer) or a residual sum (graph/hf_build.c loom_hf_residual). */
static bool residual_norm(const loom_graph *g, const loom_op *op)
{
    if (op->kind != LOOM_OP_NORM || op->n_in < 1) return false;
    int32_t pr = loom_graph_tensor(g, op->in[0])->producer;
    if (pr < 0) return true;
    const loom_op *p = loom_graph_op(g, pr);
    return p->layer < op->layer || (p->kind == LOOM_OP_ELEMENTWISE && strcmp(p->fn, "add") == 0);
}

static const char *last_component(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

/* MLA's up-projection and rotary ops (graph/hf_deepseek.c), in a layer that
 * has a kv_b_proj. */
static bool mla_up_op(const loom_op *op)
{
    static const char *const ops[] = {"q_b_proj", "kv_b_proj", "kv_b_split",
                                      "q_rope",   "k_rope",    "k_concat"};
    const char *c = last_component(op->name);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(c, ops[i]) == 0) return true;
    return false;
}

/* The module prefix of an op's name: "model.layers.3.mlp." of
 * "model.layers.3.mlp.act_fn" (length, 0 when the name has no dot). */
static size_t prefix_len(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? (size_t)(dot - name) + 1 : 0;
}

bool loom_recompute_core_attn_op(const loom_graph *g, int32_t id)
{
    const loom_op *op = loom_graph_op(g, id);
    return op->kind == LOOM_OP_ATTENTION || core_op(g, op);
}

uint32_t loom_recompute_op_modules(const loom_graph *g, int32_t id)
{
    const loom_op *op = loom_graph_op(g, id);
    uint32_t m = loom_recompute_core_attn_op(g, id) ? LOOM_RC_CORE_ATTN : 0;
    if (!loom_memory_is_block(g, op->layer)) return m;
    if (residual_norm(g, op)) m |= LOOM_RC_LAYERNORM;
    bool expert = op->n_out > 0 && loom_memory_is_expert_tensor(loom_graph_tensor(g, op->out[0]));
    if (activation(op) && expert) m |= LOOM_RC_MOE_ACT;

    /* The layer's MoE module (named by its route op) and its dense MLP or
     * shared experts (named by their activation's module). */
    int32_t first, count;
    loom_graph_layer_ops(g, op->layer, &first, &count);
    const char *moe = NULL, *ffn = NULL;
    size_t moe_n = 0, ffn_n = 0;
    bool mla = false;
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *o = loom_graph_op(g, i);
        if (o->kind == LOOM_OP_MOE_ROUTE && !moe) moe = o->name, moe_n = prefix_len(o->name);
        bool o_expert = o->n_out > 0 && loom_memory_is_expert_tensor(loom_graph_tensor(g, o->out[0]));
        if (activation(o) && !o_expert && !ffn) ffn = o->name, ffn_n = prefix_len(o->name);
        mla |= strcmp(last_component(o->name), "kv_b_proj") == 0;
    }
    if (mla && mla_up_op(op)) m |= LOOM_RC_MLA_UP_PROJ;
    if (moe && moe_n && strncmp(op->name, moe, moe_n) == 0) m |= LOOM_RC_MOE;
    if (ffn && ffn_n && strncmp(op->name, ffn, ffn_n) == 0)
        m |= moe ? LOOM_RC_SHARED_EXPERTS : LOOM_RC_MLP;
    return m;
}

bool loom_recompute_op_reruns(const loom_graph *g, const loom_parallel *p, int32_t op)
{
    uint32_t sel = loom_recompute_selected(p);
    if (!sel) return false;
    uint32_t m = loom_recompute_op_modules(g, op);
    if (p->framework == LOOM_FRAMEWORK_TORCHTITAN)
        return (m & LOOM_RC_CORE_ATTN) && core_op(g, loom_graph_op(g, op));
    return (m & sel) != 0;
}

bool loom_recompute_drops(const loom_graph *g, const loom_parallel *p, int32_t saver,
                          int32_t tensor)
{
    uint32_t sel = loom_recompute_selected(p);
    if (!sel) return false;
    const loom_tensor *t = loom_graph_tensor(g, tensor);
    if ((sel & LOOM_RC_CORE_ATTN) && attention_core(t)) return true;
    if (p->framework == LOOM_FRAMEWORK_TORCHTITAN || t->producer < 0) return false;
    uint32_t made = loom_recompute_op_modules(g, t->producer) & sel & ~LOOM_RC_CORE_ATTN;
    const uint32_t without_output = LOOM_RC_LAYERNORM | LOOM_RC_MOE_ACT | LOOM_RC_MLA_UP_PROJ;
    if (made & without_output) return true;
    /* a checkpointed module keeps its output: dropped only inside it */
    return (made & loom_recompute_op_modules(g, saver)) != 0;
}
