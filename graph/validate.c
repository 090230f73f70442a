/*
 * validate.c — cycle detection and topological order, through igraph.
 *
 * Vertices are ops; an edge u -> v means v reads a tensor u writes. A graph
 * that is not a DAG has a strongly connected component with more than one
 * vertex (or a self-loop); walking successors inside that component from any
 * of its vertices must revisit one, and the revisited stretch is a cycle whose
 * ops we name. igraph's default error handler aborts, so it is replaced with
 * the "ignore" handler and every return code is translated into loom_status.
 */
#include "graph/validate.h"

#include <igraph.h>
#include <stdlib.h>
#include <string.h>

static void quiet_igraph(void)
{
    static int done;
    if (done) return;
    done = 1;
    igraph_set_error_handler(igraph_error_handler_ignore);
    igraph_set_warning_handler(igraph_warning_handler_ignore);
}

/* Builds the op dependency graph. */
static loom_status build(const loom_graph *g, igraph_t *ig, loom_error *err)
{
    quiet_igraph();
    int32_t n = loom_graph_num_ops(g);
    igraph_vector_int_t edges;
    if (igraph_vector_int_init(&edges, 0))
        return loom_error_set(err, LOOM_ERR_NOMEM, "igraph: out of memory");
    for (int32_t v = 0; v < n; v++) {
        const loom_op *op = loom_graph_op(g, v);
        for (int k = 0; k < op->n_in; k++) {
            int32_t u = loom_graph_tensor(g, op->in[k])->producer;
            if (u < 0) continue;
            if (igraph_vector_int_push_back(&edges, u) || igraph_vector_int_push_back(&edges, v)) {
                igraph_vector_int_destroy(&edges);
                return loom_error_set(err, LOOM_ERR_NOMEM, "igraph: out of memory");
            }
        }
    }
    igraph_error_t rc = igraph_create(ig, &edges, n, IGRAPH_DIRECTED);
    igraph_vector_int_destroy(&edges);
    if (rc) return loom_error_set(err, LOOM_ERR_SOLVER, "igraph_create failed (code %d)", (int)rc);
    return LOOM_OK;
}

/* Names one cycle inside the strongly connected component `comp` of `ig`. */
static loom_status name_cycle(const loom_graph *g, const igraph_t *ig,
                              const igraph_vector_int_t *membership, igraph_integer_t comp,
                              igraph_integer_t start, loom_error *err)
{
    int32_t n = loom_graph_num_ops(g);
    int32_t *pos = malloc((size_t)n * sizeof *pos), *path = malloc((size_t)(n + 1) * sizeof *path);
    if (!pos || !path) {
        free(pos);
        free(path);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory naming a cycle");
    }
    for (int32_t i = 0; i < n; i++) pos[i] = -1;
    igraph_vector_int_t nb;
    igraph_vector_int_init(&nb, 0);
    int32_t len = 0, v = (int32_t)start;
    while (pos[v] < 0) {
        pos[v] = len;
        path[len++] = v;
        igraph_neighbors(ig, &nb, v, IGRAPH_OUT);
        int32_t next = -1;
        for (igraph_integer_t i = 0; i < igraph_vector_int_size(&nb); i++) {
            igraph_integer_t w = VECTOR(nb)[i];
            if (VECTOR(*membership)[w] == comp) {
                next = (int32_t)w;
                break;
            }
        }
        LOOM_ASSERT(next >= 0);   /* every vertex of a cyclic SCC has a successor in it */
        v = next;
    }
    igraph_vector_int_destroy(&nb);
    char msg[768];
    size_t m = (size_t)snprintf(msg, sizeof msg, "the op graph has a cycle: ");
    for (int32_t i = pos[v]; i < len && m < sizeof msg; i++)
        m += (size_t)snprintf(msg + m, sizeof msg - m, "%s -> ", loom_graph_op(g, path[i])->name);
    if (m < sizeof msg) snprintf(msg + m, sizeof msg - m, "%s", loom_graph_op(g, v)->name);
    free(pos);
    free(path);
    return loom_error_set(err, LOOM_ERR_INVALID, "%s", msg);
}

loom_status loom_graph_check_dag(const loom_graph *g, loom_error *err)
{
    igraph_t ig;
    loom_status s = build(g, &ig, err);
    if (s) return s;
    igraph_bool_t dag = 0;
    if (igraph_is_dag(&ig, &dag)) {
        igraph_destroy(&ig);
        return loom_error_set(err, LOOM_ERR_SOLVER, "igraph_is_dag failed");
    }
    if (dag) {
        igraph_destroy(&ig);
        return LOOM_OK;
    }
    igraph_vector_int_t membership, csize;
    igraph_integer_t ncomp = 0;
    igraph_vector_int_init(&membership, 0);
    igraph_vector_int_init(&csize, 0);
    igraph_connected_components(&ig, &membership, &csize, &ncomp, IGRAPH_STRONG);
    s = LOOM_ERR_INVALID;
    for (igraph_integer_t v = 0; v < igraph_vcount(&ig); v++) {
        igraph_integer_t c = VECTOR(membership)[v];
        bool selfloop = false;
        const loom_op *op = loom_graph_op(g, (int32_t)v);
        for (int k = 0; k < op->n_in; k++)
            if (loom_graph_tensor(g, op->in[k])->producer == v) selfloop = true;
        if (selfloop) {
            s = loom_error_set(err, LOOM_ERR_INVALID, "the op graph has a cycle: %s reads its own output",
                               op->name);
            break;
        }
        if (VECTOR(csize)[c] > 1) {
            s = name_cycle(g, &ig, &membership, c, v, err);
            break;
        }
    }
    igraph_vector_int_destroy(&membership);
    igraph_vector_int_destroy(&csize);
    igraph_destroy(&ig);
    return s;
}
