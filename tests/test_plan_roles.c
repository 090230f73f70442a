/*
 * test_plan_roles.c — the table names every stage's parallelism as its ops'
 * specs have it (issue #23: a stage whose ops split the sequence over axis 0
 * was shown as "dp 32").
 *
 * For every golden plan (tests/golden, *.json; tests/golden/export, *.plan.json)
 * the reference reads each stage's op specs token by token — independently
 * of plan_roles.c — and decides per mesh axis of more than one GPU:
 * tensor-parallel when a dense weight (no "e" dim, or no "f") is split on it,
 * else context-parallel when an activation splits s there but not b, else
 * expert-parallel when an expert weight splits e there, else data-parallel.
 * The loom_plan_table row of the stage must show those roles ("cp32 x tp4")
 * and degrees, and the stage's fields must agree (tp · cp · dp = GPUs).
 * A hand-built stage checks the CP reading itself.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "planner/plan/plan.h"

/* Axes (bit per axis) dim `dim` of operand `o` (one tensor: "b s@0 h@1")
 * is split over; *has whether it occurs. */
static unsigned ref_axes(const char *o, const char *dim, bool *has)
{
    unsigned axes = 0;
    char buf[LOOM_PLAN_SPEC_MAX];
    snprintf(buf, sizeof buf, "%s", o);
    *has = false;
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char *at = strchr(t, '@');
        size_t n = at ? (size_t)(at - t) : strlen(t);
        if (dim && (strlen(dim) != n || strncmp(t, dim, n))) continue;
        *has = true;
        if (at) axes |= (strchr(at, '0') ? 1u : 0u) | (strchr(at, '1') ? 2u : 0u);
    }
    return axes;
}

/* Calls fn on each operand of a ", "-joined list. */
static unsigned each_operand(const char *list, unsigned (*fn)(const char *))
{
    unsigned out = 0;
    char buf[LOOM_PLAN_SPEC_MAX];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *o = strtok_r(buf, ",", &save); o; o = strtok_r(NULL, ",", &save))
        out |= fn(o);
    return out;
}

static unsigned seq_not_batch(const char *o)
{
    bool h;
    return ref_axes(o, "s", &h) & ~ref_axes(o, "b", &h);
}

static unsigned dense_weight(const char *o)
{
    bool he, hf;
    ref_axes(o, "e", &he), ref_axes(o, "f", &hf);
    return he && hf ? 0 : ref_axes(o, NULL, &he);
}

static unsigned expert_split(const char *o)
{
    bool he, hf;
    unsigned e = ref_axes(o, "e", &he);
    ref_axes(o, "f", &hf);
    return he && hf ? e : 0;
}

/* The reference label and degrees of a stage with weighted ops. */
static bool reference(const loom_plan_stage *s, char *label, size_t cap, int64_t deg[4])
{
    unsigned real = (s->mesh[0] > 1 ? 1u : 0u) | (s->mesh[1] > 1 ? 2u : 0u), tp = 0, cp = 0,
             ep = 0;
    bool weights = false;
    for (int32_t k = 0; k < s->n_ops; k++) {
        if (!s->ops[k].weight[0]) continue;
        weights = true;
        tp |= each_operand(s->ops[k].weight, dense_weight);
        ep |= each_operand(s->ops[k].weight, expert_split);
    }
    if (!weights) return false;
    for (int32_t k = 0; k < s->n_ops; k++)
        cp |= each_operand(s->ops[k].input, seq_not_batch) |
              each_operand(s->ops[k].output, seq_not_batch);
    tp &= real, ep &= real, cp &= real & ~tp;
    if (tp == 3u) cp = 0;
    const char *name[2];
    for (int a = 0; a < 2; a++) {
        unsigned bit = 1u << a;
        name[a] = !(real & bit) ? NULL : tp & bit ? "tp" : cp & bit ? "cp" : ep & bit ? "ep" : "dp";
    }
    if (tp == 3u) snprintf(label, cap, "tp%lldx%lld", (long long)s->mesh[0], (long long)s->mesh[1]);
    else if (name[0] && name[1])
        snprintf(label, cap, "%s%lld x %s%lld", name[0], (long long)s->mesh[0], name[1],
                 (long long)s->mesh[1]);
    else if (name[0]) snprintf(label, cap, "%s%lld", name[0], (long long)s->mesh[0]);
    else if (name[1]) snprintf(label, cap, "%s%lld", name[1], (long long)s->mesh[1]);
    else snprintf(label, cap, "no split");
    int64_t m0 = s->mesh[0], m1 = s->mesh[1];
    deg[0] = (tp & 1u ? m0 : 1) * (tp & 2u ? m1 : 1);
    deg[1] = (cp & 1u ? m0 : 1) * (cp & 2u ? m1 : 1);
    deg[2] = s->n_gpus / (deg[0] * deg[1]);
    deg[3] = (ep & 1u ? m0 : 1) * (ep & 2u ? m1 : 1);
    return true;
}

/* Row i of the table: its columns after "GPUs" and "nodes". */
static bool table_row(const char *table, int i, char *par, size_t cap, long long deg[4])
{
    const char *p = strstr(table, "\n  stage ");
    for (int k = 0; p && k <= i; k++) p = strchr(p + 1, '\n');
    if (!p) return false;
    int stage, rank;
    char layers[64], gpus[64], a[32], b[32];
    long long nodes;
    /* "  0     0    emb+0   0-127   16    cp32 x tp4    4    32   1    1 ..." */
    if (sscanf(p + 1, "%d %d %63s %63s %lld %31s", &stage, &rank, layers, gpus, &nodes, a) != 6 ||
        stage != i)
        return false;
    const char *q = strstr(p + 1, a) + strlen(a);
    if (sscanf(q, " x %31s", b) == 1) {
        snprintf(par, cap, "%s x %s", a, b);
        q = strstr(q, b) + strlen(b);
    } else if (strcmp(a, "no") == 0) {
        snprintf(par, cap, "no split");
        q = strstr(q, "split") + 5;
    } else snprintf(par, cap, "%s", a);
    return sscanf(q, "%lld %lld %lld %lld", &deg[0], &deg[1], &deg[2], &deg[3]) == 4;
}

static int plans_checked, stages_checked;

static void check_plan(const char *path)
{
    loom_plan *p = NULL;
    loom_error err = {0};
    if (loom_plan_read(path, &p, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        CHECK(false);
        return;
    }
    char *table = loom_plan_table(p);
    CHECK(table != NULL);
    for (int32_t i = 0; table && i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        char want[64], got[64];
        int64_t deg[4];
        long long shown[4];
        bool row = table_row(table, i, got, sizeof got, shown);
        if (!row) fprintf(stderr, "%s: no table row %d in\n%s", path, (int)i, table);
        CHECK(row);
        if (!row || !reference(s, want, sizeof want, deg)) continue;
        if (strcmp(want, got)) fprintf(stderr, "%s stage %d: table '%s', specs '%s'\n", path, (int)i, got, want);
        CHECK(strcmp(want, got) == 0);
        for (int k = 0; k < 4; k++) CHECK_INT_EQ(shown[k], deg[k]);
        CHECK_INT_EQ(s->tensor_parallel, deg[0]);
        CHECK_INT_EQ(s->context_parallel, deg[1]);
        CHECK_INT_EQ(s->data_parallel, deg[2]);
        stages_checked++;
    }
    free(table);
    loom_plan_destroy(p);
    plans_checked++;
}

static void check_dir(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return;
    char *names[256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 256;) {
        size_t l = strlen(e->d_name), sl = strlen(suffix);
        if (l > sl && strcmp(e->d_name + l - sl, suffix) == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        check_plan(path);
        free(names[i]);
    }
}

/* A stage whose blocks split the sequence over axis 0 and the heads over
 * axis 1 is CP x TP, not DP x TP. */
static void context_parallel_stage(void)
{
    loom_plan_stage s = {.mesh = {32, 4}, .n_gpus = 128, .tensor_parallel = 4};
    loom_plan_op ops[2] = {
        {.name = "q_proj", .input = "b s@0 h", .weight = "h heads@1 dh",
         .output = "b s@0 heads@1 dh"},
        {.name = "sdpa", .input = "b s@0 heads@1 dh, b s kvh@1 dh", .output = "b s@0 heads@1 dh"}};
    s.ops = ops, s.n_ops = 2;
    loom_plan_roles r;
    loom_plan_stage_roles(&s, &r);
    CHECK_INT_EQ(r.axis[0], LOOM_AXIS_CP);
    CHECK_INT_EQ(r.axis[1], LOOM_AXIS_TP);
    CHECK_INT_EQ(r.tp, 4);
    CHECK_INT_EQ(r.cp, 32);
    CHECK_INT_EQ(r.dp, 1);
    char label[48];
    loom_plan_roles_label(&r, s.mesh, label, sizeof label);
    CHECK(strcmp(label, "cp32 x tp4") == 0);
    /* the batch split as well: data parallel */
    snprintf(ops[0].input, sizeof ops[0].input, "b@0 s h");
    snprintf(ops[0].output, sizeof ops[0].output, "b@0 s heads@1 dh");
    snprintf(ops[1].input, sizeof ops[1].input, "b@0 s heads@1 dh");
    snprintf(ops[1].output, sizeof ops[1].output, "b@0 s heads@1 dh");
    loom_plan_stage_roles(&s, &r);
    CHECK_INT_EQ(r.axis[0], LOOM_AXIS_DP);
    CHECK_INT_EQ(r.dp, 32);
}

/* Layer slots in the model's numbering: slot 0 the embedding, slot k block
 * k-1 (model.layers.k-1), slot L+1 the head. */
static void layer_labels(void)
{
    loom_plan p = {.layer_count = 82};
    p.model_info.layers = 80;
    char b[40];
    loom_plan_layers_label(&p, 0, 5, b, sizeof b);
    CHECK(strcmp(b, "emb+0-4") == 0);
    loom_plan_layers_label(&p, 6, 10, b, sizeof b);
    CHECK(strcmp(b, "5-9") == 0);
    loom_plan_layers_label(&p, 76, 81, b, sizeof b);
    CHECK(strcmp(b, "75-79+head") == 0);
    loom_plan_layers_label(&p, 81, 81, b, sizeof b);
    CHECK(strcmp(b, "head") == 0);
    p.layer_count = 5;   /* not an HF layout: the slots */
    loom_plan_layers_label(&p, 1, 3, b, sizeof b);
    CHECK(strcmp(b, "1-3") == 0);
}

int main(void)
{
    context_parallel_stage();
    layer_labels();
    check_dir("tests/golden", ".json");
    check_dir("tests/golden/export", ".plan.json");
    printf("%d golden plans, %d stages checked against their specs\n", plans_checked,
           stages_checked);
    CHECK(plans_checked >= 7);
    return check_done();
}
