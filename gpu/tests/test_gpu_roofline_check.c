/*
 * test_gpu_roofline_check.c — the roofline-vs-measured summary (no GPU
 * needed). A db is made whose "measurements" are the roofline scaled per
 * kind: einsums at 2× the roofline (error 1/2 - 1 = -50%), norms at half of
 * it (+100%), elementwise ops equal (0%), attention left out. The summary
 * must report exactly those errors, per kind, over the distinct keys.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "costs/compute.h"
#include "gpu/enumerate.h"
#include "gpu/roofline_check.h"
#include "graph/model.h"

int main(void)
{
    loom_error err;
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = 1024;
    loom_graph *g = NULL;
    loom_cluster c;
    if (loom_model_load("examples/models/llama-3-8b.json", &mo, &g, &err) ||
        loom_cluster_load("dgx-h100-x1", &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    loom_cost_model *m;
    loom_profile_db *db;
    CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &m, &err), LOOM_OK);
    loom_profile_db_create("H100-SXM5-80GB", NULL, NULL, NULL, &db, &err);
    int expect_einsum = 0, expect_norm = 0;
    for (int64_t tp = 1; tp <= 2; tp++)
        for (int sp = 0; sp < 2 && (sp == 0 || tp > 1); sp++) {
            loom_dim div[6];
            int nd = loom_profile_tp_divisors(g, tp, sp, div);
            loom_dim_split splits[6];
            for (int i = 0; i < nd; i++) splits[i] = (loom_dim_split){div[i].name, div[i].size};
            for (int32_t id = 0; id < loom_graph_num_ops(g); id++) {
                loom_profile_entry e;
                memset(&e, 0, sizeof e);
                loom_op_time t;
                loom_op_kind kind = loom_graph_op(g, id)->kind;
                if (kind == LOOM_OP_ATTENTION ||
                    loom_profile_key_from_op(g, id, div, nd, &e.key, &err) ||
                    loom_cost_op_time(m, g, id, splits, nd, &t, &err) || loom_profile_db_find(db, &e.key))
                    continue;
                double f = kind == LOOM_OP_EINSUM ? 2.0 : kind == LOOM_OP_NORM ? 0.5 : 1.0;
                e.fwd_ns = llround(t.fwd_s * 1e9 * f);
                e.bwd_ns = llround(t.bwd_s * 1e9 * f);
                CHECK_INT_EQ(loom_profile_db_put(db, &e, &err), LOOM_OK);
                expect_einsum += kind == LOOM_OP_EINSUM;
                expect_norm += kind == LOOM_OP_NORM;
            }
        }
    loom_roofline_row rows[LOOM_OP_KIND_COUNT];
    int n = 0;
    CHECK_INT_EQ(loom_roofline_check(g, &c, db, 2, rows, &n, &err), LOOM_OK);
    bool saw_einsum = false, saw_norm = false, saw_attention = false;
    for (int i = 0; i < n; i++) {
        if (!strcmp(rows[i].op, "einsum")) {
            saw_einsum = true;
            CHECK_INT_EQ(rows[i].n, expect_einsum);
            CHECK_NEAR_REL(rows[i].median_err, -0.5, 1e-3);
            CHECK_NEAR_REL(rows[i].median_abs_err, 0.5, 1e-3);
            CHECK_NEAR_REL(rows[i].roofline_s / rows[i].measured_s, 0.5, 1e-3);
        } else if (!strcmp(rows[i].op, "norm")) {
            saw_norm = true;
            CHECK_INT_EQ(rows[i].n, expect_norm);
            CHECK_NEAR_REL(rows[i].median_err, 1.0, 1e-3);
            CHECK_NEAR_REL(rows[i].max_abs_err, 1.0, 1e-3);
        } else if (!strcmp(rows[i].op, "elementwise")) {
            CHECK(fabs(rows[i].median_err) < 1e-3);
        } else if (!strcmp(rows[i].op, "attention")) {
            saw_attention = true;
        }
    }
    CHECK(saw_einsum && saw_norm && !saw_attention);
    CHECK(expect_einsum > 0 && expect_norm >= 2);   /* rmsnorm whole and sequence-parallel */
    /* An empty db compares nothing. */
    loom_profile_db *empty;
    loom_profile_db_create("H100-SXM5-80GB", NULL, NULL, NULL, &empty, &err);
    CHECK_INT_EQ(loom_roofline_check(g, &c, empty, 2, rows, &n, &err), LOOM_OK);
    CHECK_INT_EQ(n, 0);
    loom_profile_db_destroy(empty);
    loom_profile_db_destroy(db);
    loom_cost_model_destroy(m);
    loom_graph_destroy(g);
    return check_done();
}
