/*
 * graph_json.c — reader and writer of loom graph files ("loom-graph/1";
 * schema and example in docs/graph-format.md).
 *
 * Reading is two passes over the document: tensors first (each declared
 * once, by name, with named dims and positive sizes whose product stays
 * below 2^53), then ops, whose operands are resolved by name through a hash
 * table. The graph's own checks (einsum subscripts against operand shapes,
 * per-kind operand rules) run as each op is added and are reported at that
 * op's JSON path; whole-graph checks (layers contiguous, no dangling tensor,
 * no cycle — naming the ops on it) run at the end. Nothing is half-built
 * on failure: the graph is destroyed and *out stays NULL.
 *
 * Writing emits members in a fixed order and omits defaults, so that
 * write(read(write(g))) is byte-identical to write(g).
 */
#include "graph/graph_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/json.h"
#include "graph/model_facts.h"

#define PATH_MAX_LEN 160   /* a JSON path such as $.ops[12345].inputs[3] */
#define SUB_MAX_LEN (PATH_MAX_LEN + 32)

/* ---- name -> tensor id (open addressing, FNV-1a) --------------------------- */

typedef struct {
    int32_t *slot;   /* tensor id + 1, 0 = empty */
    uint32_t mask;
} name_map;

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static bool map_init(name_map *m, int32_t n)
{
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)n + 1) cap *= 2;
    m->slot = calloc(cap, sizeof *m->slot);
    m->mask = cap - 1;
    return m->slot != NULL;
}

/* Returns the id of `name`, or -1; with insert_id >= 0 inserts it when absent. */
static int32_t map_find(name_map *m, const loom_graph *g, const char *name, int32_t insert_id)
{
    for (uint32_t i = hash_name(name) & m->mask;; i = (i + 1) & m->mask) {
        int32_t v = m->slot[i];
        if (v == 0) {
            if (insert_id >= 0) m->slot[i] = insert_id + 1;
            return -1;
        }
        if (strcmp(loom_graph_tensor(g, v - 1)->name, name) == 0) return v - 1;
    }
}

/* ---- reading ------------------------------------------------------------------- */

static const char *const top_keys[] = {"format", "name", "dtype", "model", "tensors", "ops", NULL};
static const char *const tensor_keys[] = {"name", "dims", "shape", "dtype", "weight", NULL};
static const char *const op_keys[] = {"name", "kind", "layer", "inputs", "weights", "outputs",
                                      "einsum", "bias", "fn", "causal", "window", "chunk", "topk", "saves",
                                      "saves_mask", NULL};

/* loom_model_info members, by JSON name: integers, then booleans. */
#define INFO_INTS(X)                                                              \
    X(layers) X(hidden) X(heads) X(kv_heads) X(head_dim) X(ffn) X(vocab) X(experts) \
    X(experts_topk) X(shared_experts) X(moe_ffn) X(first_dense) X(q_lora_rank)      \
    X(kv_lora_rank) X(qk_rope_head_dim) X(v_head_dim) X(max_positions) X(seq) X(batch)  \
    X(mtp_params)
#define INFO_BOOLS(X) X(tied_embeddings) X(gated_mlp) X(qkv_bias) X(qk_norm) X(flash_attention) \
    X(expert_bias)

static const char *const model_keys[] = {
    "arch", "dtype", "facts",
#define NAME(f) #f,
    INFO_INTS(NAME) INFO_BOOLS(NAME)
#undef NAME
    NULL};

static loom_status read_dtype(const loom_jctx *c, const cJSON *obj, const char *path,
                              loom_dtype *dt)
{
    const char *s = NULL;
    loom_status st = loom_json_get_str(c, obj, path, "dtype", false, &s);
    if (st || !s) return st;
    if (!loom_dtype_parse(s, dt))
        return loom_json_fail(c, path, "field \"dtype\": unknown dtype \"%s\" (expected bf16, fp16, "
                              "fp32, fp8, int64, int32 or u8)", s);
    return LOOM_OK;
}

static loom_status read_model(const loom_jctx *c, const cJSON *m, loom_model_info *info)
{
    loom_status s = loom_json_check_keys(c, m, "$.model", model_keys);
    const char *arch = NULL;
    if (s == LOOM_OK) s = loom_json_get_str(c, m, "$.model", "arch", false, &arch);
    if (s == LOOM_OK && arch) {
        if (strlen(arch) >= sizeof info->arch)
            return loom_json_fail(c, "$.model.arch", "longer than %d characters",
                                  (int)sizeof info->arch - 1);
        snprintf(info->arch, sizeof info->arch, "%s", arch);
    }
    if (s == LOOM_OK) s = read_dtype(c, m, "$.model", &info->dtype);
#define INT(f) \
    if (s == LOOM_OK) s = loom_json_get_int(c, m, "$.model", #f, false, 0, (int64_t)1 << 53, &info->f);
#define BOOL(f) if (s == LOOM_OK) s = loom_json_get_bool(c, m, "$.model", #f, false, &info->f);
    INFO_INTS(INT)
    INFO_BOOLS(BOOL)
#undef INT
#undef BOOL
    const cJSON *facts = NULL;
    if (s == LOOM_OK) s = loom_json_get_object(c, m, "$.model", "facts", false, &facts);
    if (s == LOOM_OK && facts)
        s = loom_model_facts_from_json(c, facts, "$.model.facts", &info->facts);
    return s;
}

/* An array item that must be a string. */
static loom_status item_str(const loom_jctx *c, const cJSON *it, const char *path, const char **out)
{
    if (!cJSON_IsString(it))
        return loom_json_fail(c, path, "expected a string, found %s", loom_json_type_name(it));
    *out = it->valuestring;
    return LOOM_OK;
}

/* Checks that v is an object with only the `keys` members and a required
 * "name" of 1 to LOOM_NAME_MAX - 1 characters. */
static loom_status named_object(const loom_jctx *c, const cJSON *v, const char *path,
                                const char *const *keys, const char **name)
{
    if (!cJSON_IsObject(v)) return loom_json_fail(c, path, "expected an object, found %s", loom_json_type_name(v));
    loom_status s = loom_json_check_keys(c, v, path, keys);
    if (s == LOOM_OK) s = loom_json_get_str(c, v, path, "name", true, name);
    if (s == LOOM_OK && ((*name)[0] == '\0' || strlen(*name) >= LOOM_NAME_MAX))
        s = loom_json_fail(c, path, "field \"name\": expected 1 to %d characters", LOOM_NAME_MAX - 1);
    return s;
}

static loom_status read_tensor(const loom_jctx *c, loom_graph *g, name_map *map, const cJSON *t,
                               const char *path, loom_dtype def)
{
    const cJSON *dims = NULL, *shape = NULL;
    const char *name = NULL;
    bool weight = false;
    loom_dtype dt = def;
    char sub[SUB_MAX_LEN];
    loom_status s;
    if ((s = named_object(c, t, path, tensor_keys, &name)) ||
        (s = loom_json_get_array(c, t, path, "dims", true, &dims)) ||
        (s = loom_json_get_array(c, t, path, "shape", true, &shape)) ||
        (s = read_dtype(c, t, path, &dt)) ||
        (s = loom_json_get_bool(c, t, path, "weight", false, &weight)))
        return s;
    int nd = cJSON_GetArraySize(dims);
    if (nd != cJSON_GetArraySize(shape))
        return loom_json_fail(c, path, "\"dims\" has %d names but \"shape\" has %d sizes", nd,
                              cJSON_GetArraySize(shape));
    if (nd > LOOM_MAX_DIMS)
        return loom_json_fail(c, path, "%d dims (at most %d)", nd, LOOM_MAX_DIMS);
    loom_dim d[LOOM_MAX_DIMS];
    const cJSON *dn = dims->child, *sz = shape->child;
    for (int i = 0; i < nd; i++, dn = dn->next, sz = sz->next) {
        const char *dname = NULL;
        snprintf(sub, sizeof sub, "%s.dims[%d]", path, i);
        if ((s = item_str(c, dn, sub, &dname))) return s;
        if (dname[0] == '\0' || strlen(dname) >= LOOM_DIM_NAME_MAX)
            return loom_json_fail(c, sub, "a dim name has 1 to %d characters, found \"%s\"",
                                  LOOM_DIM_NAME_MAX - 1, dname);
        snprintf(sub, sizeof sub, "%s.shape[%d]", path, i);
        /* 2^53: doubles hold every integer below it exactly. */
        if (!cJSON_IsNumber(sz) || sz->valuedouble < 1 || sz->valuedouble > 9007199254740992.0 ||
            sz->valuedouble != (double)(int64_t)sz->valuedouble)
            return loom_json_fail(c, sub, "expected a positive integer size (at most 2^53), found %s%.17g",
                                  cJSON_IsNumber(sz) ? "" : loom_json_type_name(sz),
                                  cJSON_IsNumber(sz) ? sz->valuedouble : 0.0);
        snprintf(d[i].name, sizeof d[i].name, "%s", dname);
        d[i].size = (int64_t)sz->valuedouble;
    }
    if (map_find(map, g, name, -1) >= 0)
        return loom_json_fail(c, path, "tensor \"%s\" is declared twice", name);
    int32_t id;
    if ((s = loom_graph_add_tensor(g, name, dt, nd, d, weight, &id, c->err))) {
        loom_error_prefix(c->err, "%s: %s", c->file, path);
        return s;
    }
    map_find(map, g, name, id);
    return LOOM_OK;
}

/* Resolves a list of tensor names ("inputs", "weights", "outputs"). */
static loom_status read_operands(const loom_jctx *c, const loom_graph *g, name_map *map,
                                 const cJSON *op, const char *path, const char *key, bool required,
                                 int32_t *n, int32_t *ids)
{
    const cJSON *arr = NULL;
    char sub[SUB_MAX_LEN];
    loom_status s = loom_json_get_array(c, op, path, key, required, &arr);
    *n = 0;
    if (s || !arr) return s;
    int k = cJSON_GetArraySize(arr);
    if (k > LOOM_MAX_IO) return loom_json_fail(c, path, "field \"%s\": %d tensors (at most %d)", key, k, LOOM_MAX_IO);
    int i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        const char *name = NULL;
        snprintf(sub, sizeof sub, "%s.%s[%d]", path, key, i);
        if ((s = item_str(c, it, sub, &name))) return s;
        ids[i] = map_find(map, g, name, -1);
        if (ids[i] < 0)
            return loom_json_fail(c, sub, "tensor \"%s\" is not declared in $.tensors", name);
    }
    *n = k;
    return LOOM_OK;
}

/* Fails when `key` is present on an op whose kind does not take it. */
static loom_status only_for(const loom_jctx *c, const cJSON *op, const char *path, const char *key,
                            bool allowed, const char *kinds)
{
    if (allowed || !cJSON_GetObjectItemCaseSensitive(op, key)) return LOOM_OK;
    return loom_json_fail(c, path, "field \"%s\" applies only to %s ops", key, kinds);
}

static loom_status read_saves(const loom_jctx *c, const loom_graph *g, const cJSON *o,
                              const char *path, loom_op *op)
{
    const cJSON *arr = NULL;
    bool mask = false;
    char sub[SUB_MAX_LEN];
    loom_status s;
    if ((s = loom_json_get_array(c, o, path, "saves", false, &arr)) ||
        (s = loom_json_get_bool(c, o, path, "saves_mask", false, &mask)))
        return s;
    if (mask) op->saves |= LOOM_SAVE_MASK;
    if (!arr) return LOOM_OK;
    int i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        const char *name = NULL;
        snprintf(sub, sizeof sub, "%s.saves[%d]", path, i);
        if ((s = item_str(c, it, sub, &name))) return s;
        uint32_t bit = 0;
        for (int k = 0; k < op->n_in && !bit; k++)
            if (strcmp(loom_graph_tensor(g, op->in[k])->name, name) == 0) bit = LOOM_SAVE_IN(k);
        for (int k = 0; k < op->n_out && !bit; k++)
            if (strcmp(loom_graph_tensor(g, op->out[k])->name, name) == 0) bit = LOOM_SAVE_OUT(k);
        if (!bit)
            return loom_json_fail(c, sub, "\"%s\" is not one of this op's inputs or outputs", name);
        op->saves |= bit;
    }
    return LOOM_OK;
}

static loom_status read_op(const loom_jctx *c, loom_graph *g, name_map *map, const cJSON *o,
                           const char *path)
{
    loom_op op;
    memset(&op, 0, sizeof op);
    const char *name = NULL, *kind = NULL, *einsum = NULL, *fn = NULL;
    int64_t layer = 0, topk = 0;
    char sub[SUB_MAX_LEN];
    loom_status s;
    if ((s = named_object(c, o, path, op_keys, &name)) ||
        (s = loom_json_get_str(c, o, path, "kind", true, &kind)) ||
        (s = loom_json_get_int(c, o, path, "layer", true, 0, 1000000, &layer)))
        return s;
    if (!loom_op_kind_parse(kind, &op.kind)) {
        char list[256] = "";
        size_t n = 0;
        for (int k = 0; k < LOOM_OP_KIND_COUNT; k++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "",
                                  loom_op_kind_name((loom_op_kind)k));
        snprintf(sub, sizeof sub, "%s.kind", path);
        return loom_json_fail(c, sub, "unknown op kind \"%s\" (expected one of: %s)", kind, list);
    }
    bool is_einsum = op.kind == LOOM_OP_EINSUM;
    bool has_fn = op.kind == LOOM_OP_ELEMENTWISE || op.kind == LOOM_OP_NORM;
    bool is_moe = op.kind == LOOM_OP_MOE_ROUTE || op.kind == LOOM_OP_MOE_DISPATCH ||
                  op.kind == LOOM_OP_MOE_COMBINE;
    if ((s = only_for(c, o, path, "einsum", is_einsum, "einsum")) ||
        (s = only_for(c, o, path, "bias", is_einsum, "einsum")) ||
        (s = only_for(c, o, path, "fn", has_fn, "elementwise and norm")) ||
        (s = only_for(c, o, path, "causal", op.kind == LOOM_OP_ATTENTION, "attention")) ||
        (s = only_for(c, o, path, "window", op.kind == LOOM_OP_ATTENTION, "attention")) ||
        (s = only_for(c, o, path, "chunk", op.kind == LOOM_OP_ATTENTION, "attention")) ||
        (s = loom_json_get_int(c, o, path, "window", false, 1, ((int64_t)1 << 40), &op.window)) ||
        (s = loom_json_get_int(c, o, path, "chunk", false, 1, ((int64_t)1 << 40), &op.chunk)) ||
        (s = only_for(c, o, path, "topk", is_moe, "moe_route, moe_dispatch and moe_combine")) ||
        (s = loom_json_get_str(c, o, path, "einsum", is_einsum, &einsum)) ||
        (s = loom_json_get_str(c, o, path, "fn", has_fn, &fn)) ||
        (s = loom_json_get_bool(c, o, path, "bias", false, &op.bias)) ||
        (s = loom_json_get_bool(c, o, path, "causal", false, &op.causal)) ||
        (s = loom_json_get_int(c, o, path, "topk", false, 1, 1 << 20, &topk)) ||
        (s = read_operands(c, g, map, o, path, "inputs", true, &op.n_in, op.in)) ||
        (s = read_operands(c, g, map, o, path, "weights", false, &op.n_w, op.w)) ||
        (s = read_operands(c, g, map, o, path, "outputs", true, &op.n_out, op.out)) ||
        (s = read_saves(c, g, o, path, &op)))
        return s;
    if (einsum && strlen(einsum) >= LOOM_EINSUM_MAX)
        return loom_json_fail(c, path, "field \"einsum\": longer than %d characters", LOOM_EINSUM_MAX - 1);
    if (fn && strlen(fn) >= sizeof op.fn)
        return loom_json_fail(c, path, "field \"fn\": unknown function \"%s\"", fn);
    if (op.bias && op.n_w < 1)
        return loom_json_fail(c, path, "\"bias\": true needs the bias as the last of \"weights\"");
    snprintf(op.name, sizeof op.name, "%s", name);
    snprintf(op.einsum, sizeof op.einsum, "%s", einsum ? einsum : "");
    snprintf(op.fn, sizeof op.fn, "%s", fn ? fn : "");
    op.layer = (int32_t)layer;
    op.topk = (int32_t)topk;
    if ((s = loom_graph_add_op(g, &op, NULL, c->err))) loom_error_prefix(c->err, "%s: %s", c->file, path);
    return s;
}

loom_status loom_graph_json_parse(const char *file, const cJSON *root, loom_graph **out,
                                  loom_error *err)
{
    *out = NULL;
    loom_jctx c = {file, err};
    const char *format = NULL, *name = NULL;
    const cJSON *model = NULL, *tensors = NULL, *ops = NULL;
    loom_graph *g = NULL;
    name_map map = {NULL, 0};
    char path[PATH_MAX_LEN];
    loom_status s;
    if (!cJSON_IsObject(root)) return loom_json_fail(&c, "$", "expected an object, found %s", loom_json_type_name(root));
    if ((s = loom_json_check_keys(&c, root, "$", top_keys)) ||
        (s = loom_json_get_str(&c, root, "$", "format", true, &format)))
        return s;
    if (strcmp(format, LOOM_GRAPH_FORMAT) != 0)
        return loom_json_fail(&c, "$.format", "expected \"%s\", found \"%s\"", LOOM_GRAPH_FORMAT, format);
    if ((s = loom_json_get_str(&c, root, "$", "name", false, &name)) ||
        (s = loom_json_get_object(&c, root, "$", "model", false, &model)) ||
        (s = loom_json_get_array(&c, root, "$", "tensors", true, &tensors)) ||
        (s = loom_json_get_array(&c, root, "$", "ops", true, &ops)) ||
        (s = loom_graph_create(name ? name : "model", &g, err)))
        return s;
    loom_model_info *info = loom_graph_info(g);
    loom_dtype def = LOOM_DTYPE_BF16;
    if ((s = read_dtype(&c, root, "$", &def))) goto fail;
    info->dtype = def;
    if (model && (s = read_model(&c, model, info))) goto fail;
    if (!map_init(&map, cJSON_GetArraySize(tensors))) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", file);
        goto fail;
    }
    int i = 0;
    for (const cJSON *t = tensors->child; t; t = t->next, i++) {
        snprintf(path, sizeof path, "$.tensors[%d]", i);
        if ((s = read_tensor(&c, g, &map, t, path, def))) goto fail;
    }
    i = 0;
    for (const cJSON *o = ops->child; o; o = o->next, i++) {
        snprintf(path, sizeof path, "$.ops[%d]", i);
        if ((s = read_op(&c, g, &map, o, path))) goto fail;
    }
    if ((s = loom_graph_finalize(g, err))) {
        loom_error_prefix(err, "%s", file);
        goto fail;
    }
    free(map.slot);
    *out = g;
    return LOOM_OK;
fail:
    free(map.slot);
    loom_graph_destroy(g);
    return s;
}

loom_status loom_graph_json_read(const char *path, loom_graph **out, loom_error *err)
{
    cJSON *root = NULL;
    *out = NULL;
    loom_json_limits lim = LOOM_JSON_LIMITS_GRAPH;
    loom_status s = loom_json_parse_file_limited(path, &lim, &root, err);
    if (s) return s;
    s = loom_graph_json_parse(path, root, out, err);
    cJSON_Delete(root);
    return s;
}

/* ---- writing --------------------------------------------------------------------- */

static cJSON *name_list(const loom_graph *g, int32_t n, const int32_t *ids)
{
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(loom_graph_tensor(g, ids[i])->name));
    return a;
}

static cJSON *dump_model(const loom_model_info *info)
{
    cJSON *m = cJSON_CreateObject();
    if (!m) return NULL;
    if (info->arch[0]) cJSON_AddStringToObject(m, "arch", info->arch);
#define INT(f) \
    if (info->f) cJSON_AddNumberToObject(m, #f, (double)info->f);
#define BOOL(f) \
    if (info->f) cJSON_AddBoolToObject(m, #f, 1);
    INFO_INTS(INT)
    INFO_BOOLS(BOOL)
#undef INT
#undef BOOL
    if (info->facts.known) cJSON_AddItemToObject(m, "facts", loom_model_facts_to_json(&info->facts));
    return m;
}

static cJSON *dump_tensor(const loom_tensor *t, loom_dtype def)
{
    cJSON *o = cJSON_CreateObject(), *dims = cJSON_CreateArray(), *shape = cJSON_CreateArray();
    if (!o || !dims || !shape) {
        cJSON_Delete(o);
        cJSON_Delete(dims);
        cJSON_Delete(shape);
        return NULL;
    }
    cJSON_AddStringToObject(o, "name", t->name);
    for (int d = 0; d < t->ndim; d++) {
        cJSON_AddItemToArray(dims, cJSON_CreateString(t->dims[d].name));
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->dims[d].size));
    }
    cJSON_AddItemToObject(o, "dims", dims);
    cJSON_AddItemToObject(o, "shape", shape);
    if (t->dtype != def) cJSON_AddStringToObject(o, "dtype", loom_dtype_name(t->dtype));
    if (t->is_weight) cJSON_AddBoolToObject(o, "weight", 1);
    return o;
}

static cJSON *dump_op(const loom_graph *g, const loom_op *op)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "name", op->name);
    cJSON_AddStringToObject(o, "kind", loom_op_kind_name(op->kind));
    cJSON_AddNumberToObject(o, "layer", op->layer);
    cJSON_AddItemToObject(o, "inputs", name_list(g, op->n_in, op->in));
    if (op->n_w) cJSON_AddItemToObject(o, "weights", name_list(g, op->n_w, op->w));
    cJSON_AddItemToObject(o, "outputs", name_list(g, op->n_out, op->out));
    if (op->kind == LOOM_OP_EINSUM) cJSON_AddStringToObject(o, "einsum", op->einsum);
    if (op->bias) cJSON_AddBoolToObject(o, "bias", 1);
    if (op->kind == LOOM_OP_ELEMENTWISE || op->kind == LOOM_OP_NORM)
        cJSON_AddStringToObject(o, "fn", op->fn);
    if (op->causal) cJSON_AddBoolToObject(o, "causal", 1);
    if (op->window) cJSON_AddNumberToObject(o, "window", (double)op->window);
    if (op->chunk) cJSON_AddNumberToObject(o, "chunk", (double)op->chunk);
    if (op->topk) cJSON_AddNumberToObject(o, "topk", op->topk);
    int32_t saved[2 * LOOM_MAX_IO], n = 0;
    for (int k = 0; k < op->n_in; k++)
        if (op->saves & LOOM_SAVE_IN(k)) saved[n++] = op->in[k];
    for (int k = 0; k < op->n_out; k++)
        if (op->saves & LOOM_SAVE_OUT(k)) saved[n++] = op->out[k];
    if (n) cJSON_AddItemToObject(o, "saves", name_list(g, n, saved));
    if (op->saves & LOOM_SAVE_MASK) cJSON_AddBoolToObject(o, "saves_mask", 1);
    return o;
}

loom_status loom_graph_json_dump(const loom_graph *g, char **out_text, loom_error *err)
{
    *out_text = NULL;
    const loom_model_info *info = loom_graph_info_c(g);
    cJSON *root = cJSON_CreateObject(), *tensors = cJSON_CreateArray(), *ops = cJSON_CreateArray();
    cJSON *model = dump_model(info);
    bool ok = root && tensors && ops && model;
    if (ok) {
        cJSON_AddStringToObject(root, "format", LOOM_GRAPH_FORMAT);
        cJSON_AddStringToObject(root, "name", loom_graph_name(g));
        cJSON_AddStringToObject(root, "dtype", loom_dtype_name(info->dtype));
        if (model->child) cJSON_AddItemToObject(root, "model", model);
        else cJSON_Delete(model);
        model = NULL;
        cJSON_AddItemToObject(root, "tensors", tensors);
        cJSON_AddItemToObject(root, "ops", ops);
        tensors = ops = NULL;
        cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "tensors");
        for (int32_t i = 0; ok && i < loom_graph_num_tensors(g); i++) {
            cJSON *t = dump_tensor(loom_graph_tensor(g, i), info->dtype);
            ok = t != NULL;
            if (ok) cJSON_AddItemToArray(arr, t);
        }
        arr = cJSON_GetObjectItemCaseSensitive(root, "ops");
        for (int32_t i = 0; ok && i < loom_graph_num_ops(g); i++) {
            cJSON *o = dump_op(g, loom_graph_op(g, i));
            ok = o != NULL;
            if (ok) cJSON_AddItemToArray(arr, o);
        }
    }
    char *text = ok ? loom_json_print(root) : NULL;
    cJSON_Delete(root);
    cJSON_Delete(tensors);
    cJSON_Delete(ops);
    cJSON_Delete(model);
    if (!text) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory writing graph %s", loom_graph_name(g));
    *out_text = text;
    return LOOM_OK;
}

loom_status loom_graph_json_write(const loom_graph *g, const char *path, loom_error *err)
{
    char *text;
    loom_status s = loom_graph_json_dump(g, &text, err);
    if (s) return s;
    s = loom_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return s;
}
