/*
 * calib_fit.c — fitting the efficiencies to measured runs (calib_fit.h; the
 * runs are read by calib_records_json.c).
 *
 * Why fit at all? The roofline and alpha-beta formulas are exact about
 * FLOPs and bytes but not about what fraction of peak real kernels and NCCL
 * reach. Those fractions are properties of the hardware and its software
 * stack, not of a model or a configuration, so a handful of them, fitted
 * on one set of runs, should predict other runs on the same GPU. That is
 * the test of a fit (held-out runs), and what keeps it honest: we fit only
 * LOOM_CALIB_FIT_PARAMS — large-GEMM efficiency, HBM efficiency of
 * memory-bound kernels, flash-attention efficiency, NVLink efficiency and
 * the share of the data-parallel gradient sync hidden behind the backward —
 * each inside a physical range. Nothing is fitted per record or per model.
 *
 * Objective. Iteration times span 0.45 s to 94 s, so errors are compared
 * as logs, e_i = |ln(pred_i(θ) / meas_i)|, through a Huber loss (quadratic
 * up to 5%, linear beyond) so that one record the model cannot explain —
 * a run with a setting the record does not state — does not drag every
 * efficiency with it:
 *     E(θ) = Σ_i ρ(e_i) + λ · Σ_k ((θ_k - θ0_k) / w_k)²
 * with θ0 the device's prior (loom_calib_prior) and w_k the width of the
 * parameter's range. The small prior (λ = 1e-3) decides parameters the
 * records cannot see — grad_sync_overlap when no record has data
 * parallelism, attn_eff when none uses flash attention — and keeps them at
 * the prior instead of wherever a flat objective leaves them.
 *
 * Method. Cyclic coordinate descent: for each parameter in turn, a
 * golden-section search over its range with the others fixed; sweeps
 * repeat until a sweep improves E by less
 * than 1e-5 relative (at most LOOM_FIT_SWEEPS). A parameter whose two range
 * ends leave the data term unchanged is skipped. Everything is
 * deterministic: the same records give the same calibration bit for bit.
 *
 * Units: seconds; efficiencies as fractions; FLOPs.
 */
#include "costs/calib_fit.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/huber.h"
#include "costs/compute.h"
#include "costs/eval.h"
#include "graph/model.h"

#define LOOM_FIT_SWEEPS 5
#define LOOM_FIT_GOLDEN_ITERS 16
#define LOOM_FIT_PRIOR 1e-3
#define LOOM_FIT_HUBER 0.05

/* ---- graphs and clusters ---------------------------------------------------- */

loom_status loom_calib_record_graph(const loom_calib_record *r, loom_graph **out, loom_error *err)
{
    /* A GPT-2-style HF config of the record's shape (learned positions as
     * long as the sequence; dropout at the HF default 0.1; tied embeddings,
     * Megatron's default). */
    cJSON *cfg = cJSON_CreateObject();
    cJSON *arch = cJSON_CreateStringArray((const char *[]){"GPT2LMHeadModel"}, 1);
    if (!cfg || !arch) {
        cJSON_Delete(cfg);
        cJSON_Delete(arch);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    }
    cJSON_AddItemToObject(cfg, "architectures", arch);
    cJSON_AddStringToObject(cfg, "model_type", "gpt2");
    cJSON_AddNumberToObject(cfg, "n_embd", (double)r->hidden);
    cJSON_AddNumberToObject(cfg, "n_layer", (double)r->layers);
    cJSON_AddNumberToObject(cfg, "n_head", (double)r->heads);
    cJSON_AddNumberToObject(cfg, "n_inner", (double)r->ffn);
    cJSON_AddNumberToObject(cfg, "vocab_size", (double)r->vocab);
    cJSON_AddNumberToObject(cfg, "n_positions", (double)r->par.seq);
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = r->par.seq;
    o.batch = r->par.mbs;
    o.dtype = r->par.dtype;
    o.flash_attention = r->par.flash;
    char file[96];
    snprintf(file, sizeof file, "record %s", r->model);
    loom_status s = loom_model_build_hf(file, cfg, r->model, &o, out, err);
    cJSON_Delete(cfg);
    return s;
}

/* The DGX presets a record's cluster is built from, by GPU. */
static const struct {
    const char *dev, *preset;
} record_presets[] = {
    {"A100-SXM4-80GB", "dgx-a100-80g"}, {"A100-SXM4-40GB", "dgx-a100-40g"},
    {"H100-SXM5-80GB", "dgx-h100"},     {"H200-SXM-141GB", "dgx-h200"},
    {"B200-HGX-180GB", "dgx-b200"},     {"V100-SXM2-16GB", "dgx1-v100"},
};

const char *loom_calib_record_presets(char *buf, size_t n)
{
    size_t k = 0;
    if (n) buf[0] = '\0';
    for (size_t i = 0; i < sizeof record_presets / sizeof record_presets[0] && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", record_presets[i].dev);
    return buf;
}

bool loom_calib_record_has_preset(const char *gpu)
{
    for (size_t i = 0; i < sizeof record_presets / sizeof record_presets[0]; i++)
        if (strcmp(record_presets[i].dev, gpu) == 0) return true;
    return false;
}

loom_status loom_calib_record_cluster(const loom_calib_record *r, loom_cluster *out,
                                      loom_error *err)
{
    for (size_t i = 0; i < sizeof record_presets / sizeof record_presets[0]; i++) {
        const char *dev = record_presets[i].dev, *preset = record_presets[i].preset;
        if (strcmp(dev, r->gpu) != 0) continue;
        int64_t nodes = (r->gpus + 7) / 8;
        if (r->gpus > 8 && r->gpus % 8 != 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "record %s: %lld GPUs are not whole nodes of 8", r->model,
                                  (long long)r->gpus);
        char name[64];
        snprintf(name, sizeof name, "%s-x%lld", preset, (long long)nodes);
        loom_status s = loom_cluster_preset(name, out, err);
        if (s) return s;
        if (r->gpus < 8) out->gpus_per_node = r->gpus;
        return LOOM_OK;
    }
    return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "record %s: no DGX preset for GPU %s",
                          r->model, r->gpu);
}

/* ---- prediction ------------------------------------------------------------------ */

/* A record ready to evaluate many times: its graph, cluster and layer
 * classes. */
typedef struct {
    loom_graph *g;
    loom_cluster c;
    int32_t *cls;
} prepared;

static void unprepare(prepared *pr, size_t n)
{
    if (!pr) return;
    for (size_t i = 0; i < n; i++) {
        loom_graph_destroy(pr[i].g);
        free(pr[i].cls);
    }
    free(pr);
}

static loom_status prepare(const loom_calib_record *recs, size_t n, prepared **out, loom_error *err)
{
    prepared *pr = calloc(n ? n : 1, sizeof *pr);
    if (!pr) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        loom_status s = loom_calib_record_cluster(&recs[i], &pr[i].c, err);
        if (s == LOOM_OK) s = loom_calib_record_graph(&recs[i], &pr[i].g, err);
        if (s == LOOM_OK) {
            pr[i].cls = calloc((size_t)loom_graph_layer_count(pr[i].g), sizeof *pr[i].cls);
            if (pr[i].cls) s = loom_eval_layer_classes(pr[i].g, pr[i].cls, err);
            else s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
        }
        if (s) {
            unprepare(pr, n);
            return s;
        }
    }
    *out = pr;
    return LOOM_OK;
}

static loom_status predict_one(const loom_calib_record *r, const prepared *pr,
                               const loom_calib *cal, double *t, loom_error *err)
{
    loom_cost_model *cm = NULL;
    loom_eval_result res;
    loom_status s = loom_cost_model_create(&pr->c, cal, NULL, &cm, err);
    loom_eval_opts o = {.layer_class = pr->cls, .time_only = true};
    if (s == LOOM_OK) s = loom_eval_megatron_ex(pr->g, cm, &r->par, &o, &res, err);
    if (s == LOOM_OK) *t = res.step_time_s;
    else loom_error_prefix(err, "record %s", r->model);
    if (cm) loom_eval_result_free(&res);
    loom_cost_model_destroy(cm);
    return s;
}

/* The calibration a record is evaluated with: cal when it is for the
 * record's GPU (or for any GPU), else the GPU's defaults. */
static void calib_for(const loom_calib_record *r, const loom_calib *cal, loom_calib *use)
{
    const loom_device *d = loom_device_find(r->gpu);
    if (cal && (cal->device[0] == '\0' || loom_device_find(cal->device) == d)) *use = *cal;
    else loom_calib_default(d, use);
}

loom_status loom_calib_predict(const loom_calib_record *recs, size_t n, const loom_calib *cal,
                               double *predicted, loom_error *err)
{
    prepared *pr = NULL;
    loom_status s = prepare(recs, n, &pr, err);
    for (size_t i = 0; s == LOOM_OK && i < n; i++) {
        loom_calib use;
        calib_for(&recs[i], cal, &use);
        s = predict_one(&recs[i], &pr[i], &use, &predicted[i], err);
    }
    if (pr) unprepare(pr, n);
    return s;
}

/* ---- fitting ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    size_t offset;
    double lo, hi;
    bool per_peak;   /* bounds are seconds at peak, searched in log space */
} param_spec;

static const param_spec specs[] = {
#define LOOM_X(f, lo, hi, per_peak) {#f, offsetof(loom_calib, f), lo, hi, per_peak},
    LOOM_CALIB_FIT_PARAMS(LOOM_X)
#undef LOOM_X
};
#define N_PARAMS (sizeof specs / sizeof specs[0])

/* A parameter with its bounds for one device. */
typedef struct {
    size_t offset;
    double lo, hi;
    bool log_scale;
} param;

static void device_params(const loom_device *d, param *out)
{
    double peak = loom_device_peak_flops(d, LOOM_DTYPE_BF16);
    if (!(peak > 0)) peak = loom_device_peak_flops(d, LOOM_DTYPE_FP16);
    for (size_t j = 0; j < N_PARAMS; j++) {
        double k = specs[j].per_peak ? peak : 1;
        out[j] = (param){specs[j].offset, specs[j].lo * k, specs[j].hi * k, specs[j].per_peak};
    }
}

static double *field(loom_calib *c, const param *p) { return (double *)((char *)c + p->offset); }

/* Coordinates: log10 for gemm_half_flops (it spans three decades). */
static double to_u(const param *p, double v) { return p->log_scale ? log10(fmax(v, 1e-300)) : v; }
static double from_u(const param *p, double u) { return p->log_scale ? pow(10, u) : u; }

typedef struct {
    const loom_calib_record *recs;
    const prepared *pr;
    const size_t *idx;   /* records of the device */
    size_t n;
    const param *params; /* [N_PARAMS], bounds for the device */
    loom_calib base;     /* θ0, for the prior */
    loom_error *err;
    loom_status status;
} fit_ctx;

/* Data term Σ ln²(pred/meas); *prior gets the prior term. */
static double objective(fit_ctx *f, const loom_calib *cal, double *data)
{
    double d = 0;
    for (size_t k = 0; k < f->n && f->status == LOOM_OK; k++) {
        const loom_calib_record *r = &f->recs[f->idx[k]];
        double t;
        f->status = predict_one(r, &f->pr[f->idx[k]], cal, &t, f->err);
        if (f->status) return HUGE_VAL;
        double e = fabs(log(t / r->measured_s));
        d += loom_huber(e, LOOM_FIT_HUBER);
    }
    double prior = 0;
    for (size_t j = 0; j < N_PARAMS; j++) {
        const param *p = &f->params[j];
        double w = to_u(p, p->hi) - to_u(p, p->lo);
        double z = (to_u(p, *field((loom_calib *)cal, p)) - to_u(p, *field(&f->base, p))) / w;
        prior += z * z;
    }
    if (data) *data = d;
    return d + LOOM_FIT_PRIOR * prior;
}

static double at(fit_ctx *f, loom_calib *cal, const param *p, double u, double *data)
{
    double keep = *field(cal, p);
    *field(cal, p) = from_u(p, u);
    double e = objective(f, cal, data);
    *field(cal, p) = keep;
    return e;
}

/* Golden-section search of parameter p over its range; sets the best of
 * the bracket and the current value. */
static void line_search(fit_ctx *f, loom_calib *cal, const param *p)
{
    const double phi = (sqrt(5.0) - 1) / 2;
    double a = to_u(p, p->lo), b = to_u(p, p->hi);
    double cur = to_u(p, *field(cal, p)), e_cur = at(f, cal, p, cur, NULL);
    double x1 = b - phi * (b - a), x2 = a + phi * (b - a);
    double f1 = at(f, cal, p, x1, NULL), f2 = at(f, cal, p, x2, NULL);
    for (int it = 0; it < LOOM_FIT_GOLDEN_ITERS && f->status == LOOM_OK; it++) {
        if (f1 <= f2) {
            b = x2, x2 = x1, f2 = f1;
            x1 = b - phi * (b - a);
            f1 = at(f, cal, p, x1, NULL);
        } else {
            a = x1, x1 = x2, f1 = f2;
            x2 = a + phi * (b - a);
            f2 = at(f, cal, p, x2, NULL);
        }
    }
    double best = f1 <= f2 ? x1 : x2, e_best = f1 <= f2 ? f1 : f2;
    if (e_best < e_cur) *field(cal, p) = from_u(p, best);
}

loom_status loom_calib_fit(const loom_calib_record *recs, size_t n, const char *device,
                           loom_calib *cal, loom_calib_fit_stats *st, loom_error *err)
{
    memset(st, 0, sizeof *st);
    const loom_device *d = loom_device_find(device);
    if (!d) {
        char names[512];
        return loom_error_set(err, LOOM_ERR_INVALID, "unknown GPU \"%s\" (known: %s)", device,
                              loom_device_list_names(names, sizeof names));
    }
    size_t *idx = calloc(n ? n : 1, sizeof *idx), m = 0;
    if (!idx) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (loom_device_find(recs[i].gpu) == d) idx[m++] = i;
    if (m == 0) {
        free(idx);
        return loom_error_set(err, LOOM_ERR_INVALID, "no record was measured on %s", d->name);
    }
    prepared *pr = NULL;
    loom_status s = prepare(recs, n, &pr, err);
    if (s) {
        free(idx);
        return s;
    }
    param params[N_PARAMS];
    device_params(d, params);
    /* start inside the bounds */
    for (size_t j = 0; j < N_PARAMS; j++)
        *field(cal, &params[j]) = fmin(fmax(*field(cal, &params[j]), params[j].lo), params[j].hi);
    fit_ctx f = {.recs = recs, .pr = pr, .idx = idx, .n = m, .params = params, .base = *cal,
                 .err = err};
    snprintf(cal->device, sizeof cal->device, "%s", d->name);

    /* Which parameters do the records see at all? */
    bool active[N_PARAMS];
    double d0;
    objective(&f, cal, &d0);
    for (size_t j = 0; j < N_PARAMS && f.status == LOOM_OK; j++) {
        double dl, dh;
        at(&f, cal, &params[j], to_u(&params[j], params[j].lo), &dl);
        at(&f, cal, &params[j], to_u(&params[j], params[j].hi), &dh);
        active[j] = fabs(dl - d0) > 1e-12 * (1 + d0) || fabs(dh - d0) > 1e-12 * (1 + d0);
    }
    double e_prev = objective(&f, cal, NULL);
    for (int sweep = 0; sweep < LOOM_FIT_SWEEPS && f.status == LOOM_OK; sweep++) {
        for (size_t j = 0; j < N_PARAMS && f.status == LOOM_OK; j++)
            if (active[j]) line_search(&f, cal, &params[j]);
        double e = objective(&f, cal, NULL);
        st->sweeps = sweep + 1;
        if (e_prev - e <= 1e-5 * e_prev) break;
        e_prev = e;
    }
    if (f.status == LOOM_OK) {
        double *errs = calloc(m, sizeof *errs), sq = 0;
        for (size_t k = 0; k < m && errs; k++) {
            double t = 0;
            f.status = predict_one(&recs[idx[k]], &pr[idx[k]], cal, &t, err);
            if (f.status) break;
            double le = log(t / recs[idx[k]].measured_s);
            sq += le * le;
            errs[k] = fabs(t - recs[idx[k]].measured_s) / recs[idx[k]].measured_s;
        }
        if (errs && f.status == LOOM_OK) {
            /* median by insertion sort (m is small) */
            for (size_t a = 1; a < m; a++)
                for (size_t b = a; b > 0 && errs[b] < errs[b - 1]; b--) {
                    double t = errs[b];
                    errs[b] = errs[b - 1];
                    errs[b - 1] = t;
                }
            st->n = m;
            st->rms_log_err = sqrt(sq / (double)m);
            st->median_abs_err = m % 2 ? errs[m / 2] : (errs[m / 2 - 1] + errs[m / 2]) / 2;
            st->max_abs_err = errs[m - 1];
        } else if (!errs) {
            f.status = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
        }
        free(errs);
    }
    snprintf(cal->note, sizeof cal->note,
             "fitted by loom calibrate to %zu measured runs on %s (rms log error %.4f)", m,
             d->name, st->rms_log_err);
    unprepare(pr, n);
    free(idx);
    return f.status;
}
