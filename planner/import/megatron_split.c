/*
 * megatron_split.c — the pipeline layer split of a Megatron-LM launch line
 * (megatron_split.h).
 *
 * Layer split, as Megatron-Core counts it (num_layers_in_first/last_pipeline_
 * stage, --account-for-embedding/loss-in-pipeline-split, the layout string):
 *   U = L + e + l units (e, l = 1 when the embedding / loss count as a layer),
 *   even:          U / (pp·vpp) per chunk, less e on chunk 0 and l on the last;
 *   first/last f, l: those on the first / last pipeline rank, the rest shared
 *                  by the other ranks, each rank's share split over its vpp
 *                  chunks;
 *   layout:        the chunks as written.
 */
#include "planner/import/megatron_split.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decoder layers per chunk of a layout string ("Et*3|(tt|)*2,m|L"). */
static loom_status parse_layout(const loom_megatron_line *c, const char *layout, int32_t *chunks,
                                int32_t *n_out, int64_t *mtp_out)
{
    int32_t m_chunk = -1;   /* the chunk of the last "m" */
    *mtp_out = 0;
    int line = loom_megatron_line_at(c, "--pipeline-model-parallel-layout");
    /* unroll "(…)*n" and "x*n" as Megatron-Core's parse_str_to_list does */
    size_t cap = 4096;
    char *a = malloc(cap), *b = malloc(cap);
    loom_status s = LOOM_OK;
    if (!a || !b) {
        free(a);
        free(b);
        return loom_error_set(c->err, LOOM_ERR_NOMEM, "out of memory");
    }
    size_t n = 0;
    for (const char *p = layout; *p && n + 1 < cap; p++)
        if (*p != ',' && *p != ' ') a[n++] = *p;
    a[n] = '\0';
    for (int pass = 0; pass < 2 && s == LOOM_OK; pass++) {
        size_t o = 0;
        for (size_t i = 0; a[i] && s == LOOM_OK;) {
            const char *unit = &a[i];
            size_t ulen = 1;
            if (pass == 0 && a[i] == '(') {
                const char *close = strchr(&a[i], ')');
                if (!close) {
                    s = loom_megatron_line_fail(c, line, "--pipeline-model-parallel-layout '%s': unclosed '('",
                              layout);
                    break;
                }
                unit = &a[i + 1];
                ulen = (size_t)(close - unit);
            }
            size_t after = (size_t)(unit - a) + ulen + (unit != &a[i] ? 1 : 0);
            long times = 1;
            bool mult = a[after] == '*' && (pass == 1 || unit != &a[i]);
            if (mult) {
                char *end;
                times = strtol(&a[after + 1], &end, 10);
                if (end == &a[after + 1] || times < 0 || times > 100000) {
                    s = loom_megatron_line_fail(c, line, "--pipeline-model-parallel-layout '%s': bad repeat count",
                              layout);
                    break;
                }
                after = (size_t)(end - a);
            } else if (unit != &a[i]) {
                s = loom_megatron_line_fail(c, line, "--pipeline-model-parallel-layout '%s': '(...)' needs '*N'",
                          layout);
                break;
            }
            for (long t = 0; t < times; t++) {
                if (o + ulen + 1 >= cap) {
                    s = loom_megatron_line_fail(c, line, "--pipeline-model-parallel-layout '%s' is too long", layout);
                    break;
                }
                memcpy(b + o, unit, ulen);
                o += ulen;
            }
            i = after;
        }
        b[o] = '\0';
        memcpy(a, b, o + 1);
    }
    int32_t k = 0;
    int e_count = 0, l_count = 0;
    if (s == LOOM_OK) {
        chunks[0] = 0;
        size_t len = strlen(a);
        for (size_t i = 0; i < len && s == LOOM_OK; i++) {
            char ch = a[i];
            if (ch == '|') {
                if (++k >= LOOM_EXPORT_MAX_CHUNKS) s = loom_megatron_line_fail(c, line, "layout has too many stages");
                else chunks[k] = 0;
            } else if (ch == 't') {
                chunks[k]++;
            } else if (ch == 'E') {
                if (k != 0 || i != 0 || e_count++)
                    s = loom_megatron_line_fail(c, line,
                              "--pipeline-model-parallel-layout '%s': the embedding E must "
                              "come first, once",
                              layout);
            } else if (ch == 'L') {
                if (i != len - 1 || l_count++)
                    s = loom_megatron_line_fail(c, line,
                              "--pipeline-model-parallel-layout '%s': the loss L must come "
                              "last, once",
                              layout);
            } else if (ch == 'm') {
                /* multi-token prediction: not in loom's graph, but Megatron
                 * wants one "m" per --mtp-num-layers in the last stage */
                (*mtp_out)++;
                m_chunk = k;
            } else {
                s = loom_megatron_line_fail(c, line, "--pipeline-model-parallel-layout '%s': unknown layer '%c' "
                                   "(E, t, m, L and '|')", layout, ch);
            }
        }
        if (s == LOOM_OK && *mtp_out > 0 && m_chunk != k)
            s = loom_megatron_line_fail(c, line,
                      "--pipeline-model-parallel-layout '%s': the multi-token prediction "
                      "layers (m) must be in the last stage",
                      layout);
        if (s == LOOM_OK && (e_count != 1 || l_count != 1))
            s = loom_megatron_line_fail(c, line,
                      "--pipeline-model-parallel-layout '%s' needs one E first and one L last",
                      layout);
    }
    free(a);
    free(b);
    *n_out = k + 1;
    return s;
}

loom_status loom_megatron_read_split(const loom_megatron_line *c, loom_runtime_config *cfg)
{
    loom_parallel *p = &cfg->par;
    int64_t L = cfg->model.layers;
    int64_t per_vstage = 0, vstages = 0, first = 0, last = 0;
    const char *layout = NULL;
    loom_status s;
    if ((s = loom_megatron_line_int(c, "--num-layers-per-virtual-pipeline-stage", 0, 1, INT_MAX, &per_vstage)) ||
        (s = loom_megatron_line_int(c, "--num-virtual-stages-per-pipeline-rank", 0, 1, INT_MAX, &vstages)) ||
        (s = loom_megatron_line_int(c, "--decoder-first-pipeline-num-layers", 0, 0, INT_MAX, &first)) ||
        (s = loom_megatron_line_int(c, "--decoder-last-pipeline-num-layers", 0, 0, INT_MAX, &last)) ||
        (s = loom_megatron_line_str(c, "--pipeline-model-parallel-layout", NULL, &layout)))
        return s;
    bool has_first = loom_megatron_line_has(c, "--decoder-first-pipeline-num-layers"),
         has_last = loom_megatron_line_has(c, "--decoder-last-pipeline-num-layers");
    int ways = (per_vstage > 0) + (vstages > 0) + (layout != NULL);
    if (ways > 1)
        return loom_megatron_line_fail(c, c->line, "give at most one of --num-layers-per-virtual-pipeline-stage, "
                                 "--num-virtual-stages-per-pipeline-rank and "
                                 "--pipeline-model-parallel-layout (Megatron-LM rejects more)");
    int64_t e = loom_megatron_line_has(c, "--account-for-embedding-in-pipeline-split"),
            l = loom_megatron_line_has(c, "--account-for-loss-in-pipeline-split");
    int32_t *ch = cfg->chunk_layers;

    if (layout) {
        int32_t n = 0;
        int64_t mtp = 0;
        if ((s = parse_layout(c, layout, ch, &n, &mtp))) return s;
        if (mtp != cfg->model.facts.mtp_layers)
            return loom_megatron_line_fail(c, loom_megatron_line_at(c, "--pipeline-model-parallel-layout"),
                         "--pipeline-model-parallel-layout has %lld multi-token prediction "
                         "layers (m) but --mtp-num-layers is %lld (Megatron-LM requires them "
                         "equal)",
                         (long long)mtp, (long long)cfg->model.facts.mtp_layers);
        if (n % p->pp)
            return loom_megatron_line_fail(c, loom_megatron_line_at(c, "--pipeline-model-parallel-layout"),
                         "--pipeline-model-parallel-layout has %d stages, not a multiple of "
                         "--pipeline-model-parallel-size %lld",
                         (int)n, (long long)p->pp);
        int64_t sum = 0;
        for (int32_t i = 0; i < n; i++) sum += ch[i];
        if (sum != L)
            return loom_megatron_line_fail(c, loom_megatron_line_at(c, "--pipeline-model-parallel-layout"),
                         "--pipeline-model-parallel-layout places %lld transformer layers, "
                         "--num-layers is %lld",
                         (long long)sum, (long long)L);
        p->vpp = n / p->pp;
        cfg->n_chunks = n;
        return LOOM_OK;
    }
    if (per_vstage > 0 && (has_first || has_last))
        return loom_megatron_line_fail(c, loom_megatron_line_at(c, "--num-layers-per-virtual-pipeline-stage"),
                     "uneven first/last stages with --num-layers-per-virtual-pipeline-stage: "
                     "Megatron-LM needs --num-virtual-stages-per-pipeline-rank for that");
    if ((has_first || has_last) && (e || l))
        return loom_megatron_line_fail(c, c->line, "--decoder-first/last-pipeline-num-layers together with "
                                 "--account-for-embedding/loss-in-pipeline-split is not supported");

    int64_t pp = p->pp, units = L + e + l;
    if (per_vstage > 0) {
        if (units % pp || (units / pp) % per_vstage)
            return loom_megatron_line_fail(c, loom_megatron_line_at(c, "--num-layers-per-virtual-pipeline-stage"),
                         "--num-layers-per-virtual-pipeline-stage %lld does not divide the %lld "
                         "layers of each of the %lld pipeline stages (--num-layers %lld%s)",
                         (long long)per_vstage, (long long)(units / pp), (long long)pp,
                         (long long)L, units % pp ? ", which PP does not divide either" : "");
        p->vpp = units / pp / per_vstage;
    } else {
        p->vpp = vstages > 0 ? vstages : 1;
    }
    int64_t v = p->vpp, n = pp * v;
    if (n > LOOM_EXPORT_MAX_CHUNKS)
        return loom_megatron_line_fail(c, c->line, "%lld pipeline chunks: too many", (long long)n);
    if (!has_first && !has_last) {
        if (units % n)
            return loom_megatron_line_fail(c, loom_megatron_line_at(c, "--pipeline-model-parallel-size"),
                         "--num-layers %lld%s is not divisible by %lld pipeline chunks "
                         "(--pipeline-model-parallel-size %lld x %lld virtual stages); give "
                         "--decoder-first/last-pipeline-num-layers or a layout",
                         (long long)L, e || l ? " (+ embedding/loss)" : "", (long long)n,
                         (long long)pp, (long long)v);
        if (!loom_parallel_units_split(L, e, l, n, ch))
            return loom_megatron_line_fail(c, c->line, "a pipeline chunk of %lld layers cannot also hold the "
                                     "embedding or loss", (long long)(units / n));
    } else {
        int64_t rest = L - first - last, others = pp - has_first - has_last;
        if (others < 0)
            return loom_megatron_line_fail(
                c, loom_megatron_line_at(c, "--decoder-last-pipeline-num-layers"),
                "--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers "
                "need at least 2 pipeline stages, --pipeline-model-parallel-size is %lld",
                (long long)pp);
        if (rest < 0 || (others == 0 && rest != 0) || (others > 0 && rest % others))
            return loom_megatron_line_fail(c, loom_megatron_line_at(c, has_first ? "--decoder-first-pipeline-num-layers"
                                                 : "--decoder-last-pipeline-num-layers"),
                         "first stage %lld and last stage %lld layers leave %lld of --num-layers "
                         "%lld for %lld other pipeline stages: not an even share",
                         (long long)first, (long long)last, (long long)rest, (long long)L,
                         (long long)others);
        int64_t mid = others > 0 ? rest / others : 0;
        for (int64_t r = 0; r < pp; r++) {
            int64_t rank_layers = r == 0 && has_first       ? first
                                  : r == pp - 1 && has_last ? last
                                                            : mid;
            if (rank_layers % v)
                return loom_megatron_line_fail(c, c->line, "pipeline rank %lld holds %lld layers, not divisible by "
                                         "its %lld virtual stages",
                             (long long)r, (long long)rank_layers, (long long)v);
            for (int64_t j = 0; j < v; j++) ch[j * pp + r] = (int32_t)(rank_layers / v);
        }
    }
    cfg->n_chunks = (int32_t)n;
    return LOOM_OK;
}
