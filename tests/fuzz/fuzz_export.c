/*
 * fuzz_export.c — libFuzzer target: what an exporter copies from a plan
 * cannot escape its place in the file (docs/robustness.md, "Threat model").
 *
 * The input is a runtime configuration, not a file: its first 12 bytes pick
 * the degrees, batch, recompute, ZeRO, dtype, model family and mode (a
 * random but mostly valid plan), and the rest, split at the first NUL, is
 * the model name and the plan's file name — the strings a plan's author
 * controls. Each target renders the configuration twice, once with those
 * strings and once with plain ones, and the two must agree:
 *
 *   - both succeed or both fail (a name never changes what can be exported);
 *   - the same number of lines, comments at the same line numbers, and every
 *     non-comment line byte-identical (nothing left a comment);
 *   - the output is printable ASCII and newlines only (no raw control byte,
 *     no YAML line break such as NEL or U+2028, nothing TOML refuses);
 *   - in the Megatron script, single quotes are balanced on every line.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "planner/export/export.h"

static void model_for(loom_runtime_config *c, int family, int64_t layers)
{
    loom_model_info *m = &c->model;
    m->layers = layers;
    m->hidden = 4096;
    m->heads = 32;
    m->kv_heads = 8;
    m->head_dim = 128;
    m->ffn = 14336;
    m->vocab = 128256;
    m->max_positions = 8192;
    snprintf(m->arch, sizeof m->arch, "%s", family == 0 ? "llama" : family == 1 ? "gpt2" : "mixtral");
    if (family == 1) m->kv_heads = 32, m->ffn = 16384, m->tied_embeddings = true;
    if (family == 2) m->experts = 8, m->experts_topk = 2, m->moe_ffn = 14336;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Line i of s (pointer and length). */
static const char *line_at(const char *s, int i, size_t *len)
{
    for (; i > 0 && s; i--) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (!s) return NULL;
    const char *e = strchr(s, '\n');
    *len = e ? (size_t)(e - s) : strlen(s);
    return s;
}

static void compare(const char *hostile, const char *plain, loom_export_target t)
{
    const char *what = loom_export_target_name(t);
    for (const unsigned char *u = (const unsigned char *)hostile; *u; u++)
        if (*u != '\n' && (*u < 0x20 || *u >= 0x7f)) fuzz_die("a byte outside printable ASCII", what);
    int n = count_lines(hostile);
    if (n != count_lines(plain)) fuzz_die("a name changed the number of lines", hostile);
    for (int i = 0; i < n; i++) {
        size_t la, lb;
        const char *a = line_at(hostile, i, &la), *b = line_at(plain, i, &lb);
        if (!a || !b) fuzz_die("line lookup", what);
        bool ca = la > 0 && a[0] == '#', cb = lb > 0 && b[0] == '#';
        if (ca != cb) fuzz_die("a name turned a comment into content or back", hostile);
        if (!ca && (la != lb || memcmp(a, b, la) != 0))
            fuzz_die("a name changed a line that is not a comment", hostile);
        if (t == LOOM_EXPORT_MEGATRON && !ca) {
            int q = 0;
            for (size_t k = 0; k < la; k++) q += a[k] == '\'';
            if (q % 2) fuzz_die("unbalanced single quotes in the launch script", hostile);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 12) return 0;
    static loom_runtime_config c, plain;
    loom_runtime_config_init(&c);
    const uint8_t *k = data;
    static const int64_t deg[] = {1, 2, 4, 8};
    int family = k[0] % 3;
    int64_t pp = deg[k[2] % 4], layers = pp * (1 + k[7] % 8);
    model_for(&c, family, layers);
    loom_parallel *p = &c.par;
    p->tp = deg[k[1] % 4];
    p->pp = pp;
    p->dp = deg[k[3] % 4];
    p->ep = family == 2 ? deg[k[4] % 4] : 1;
    p->mbs = 1 + k[5] % 4;
    p->gbs = p->mbs * p->dp * (1 + k[6] % 8);
    p->seq = 1024 << (k[8] % 4);
    p->sp = k[9] & 1;
    p->recompute = (loom_recompute)((k[9] >> 1) % 3);
    p->zero = (k[9] >> 3) % 4;
    p->dtype = (k[9] >> 5) & 1 ? LOOM_DTYPE_FP16 : LOOM_DTYPE_BF16;
    c.inference = k[10] & 1;
    c.gpus_per_node = deg[(k[10] >> 1) % 4];
    c.max_num_seqs = p->gbs;
    c.max_model_len = p->seq;
    c.max_num_batched_tokens = p->mbs * p->seq;
    c.predicted_step_s = k[11] / 100.0;

    /* the author's strings: model name NUL file name */
    const char *rest = (const char *)data + 12;
    size_t rn = size - 12, nl = strnlen(rest, rn);
    size_t mn = nl < sizeof c.model_name - 1 ? nl : sizeof c.model_name - 1;
    memcpy(c.model_name, rest, mn);
    c.model_name[mn] = '\0';
    char source[512] = "";
    if (nl < rn) {
        size_t sn = strnlen(rest + nl + 1, rn - nl - 1);
        if (sn > sizeof source - 1) sn = sizeof source - 1;
        memcpy(source, rest + nl + 1, sn);
        source[sn] = '\0';
    }

    plain = c;
    snprintf(plain.model_name, sizeof plain.model_name, "%s", c.model_name[0] ? "m" : "");
    for (int t = 0; t < LOOM_EXPORT_TARGET_COUNT; t++) {
        char *a = NULL, *b = NULL;
        loom_error ea = {0}, eb = {0};
        loom_status sa = loom_export_render(&c, (loom_export_target)t, source, &a, NULL, NULL, &ea);
        loom_status sb = loom_export_render(&plain, (loom_export_target)t, "s", &b, NULL, NULL, &eb);
        if (sa != sb) fuzz_die("a name changed whether the plan exports", ea.msg[0] ? ea.msg : eb.msg);
        if (sa == LOOM_OK) compare(a, b, (loom_export_target)t);
        free(a);
        free(b);
    }
    return 0;
}
