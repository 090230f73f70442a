/*
 * test_json_limits.c — the checked JSON parser (base/json.c) on the
 * inputs that break lenient parsers: duplicate keys, numbers that overflow
 * to infinity, deep nesting, and objects with very many members.
 *
 * Duplicate keys are checked against a brute-force reference: for random
 * objects (small ones take the pairwise path, large ones the sorted path)
 * the reported member must be the first, in document order, whose key an
 * earlier member already has — exactly what the O(n²) definition gives.
 * An object of 200 000 distinct keys must parse (the quadratic check took
 * minutes on it; ctest's timeout would catch a regression) and one with a
 * duplicate deep inside must name it.
 *
 * Numbers written with loom_json_add_exact_number read back bit for bit,
 * also those cJSON alone prints one ulp off (0.1 + 0.2).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "base/json.h"

static uint64_t rng = 88172645463325252ull;
static int rnd(int n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int)(rng % (uint64_t)n);
}

/* Grows a heap string: appends fmt-formatted text. */
typedef struct {
    char *s;
    size_t len, cap;
} buf;

static void put(buf *b, const char *text)
{
    size_t n = strlen(text);
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s) exit(2);
    }
    memcpy(b->s + b->len, text, n + 1);
    b->len += n;
}

static loom_status parse(const char *text, loom_error *err)
{
    cJSON *root = NULL;
    loom_status s = loom_json_parse("t.json", text, strlen(text), &root, err);
    cJSON_Delete(root);
    return s;
}

/* Random objects with keys from a small alphabet; the parser's verdict
 * against the first repeated key found by brute force. */
static void duplicates_vs_brute_force(void)
{
    for (int trial = 0; trial < 300; trial++) {
        int n = trial < 150 ? 1 + rnd(40) : 65 + rnd(400);   /* both code paths */
        int alphabet = n + rnd(3 * n);                        /* some with, some without */
        int *key = malloc((size_t)n * sizeof *key);
        buf b = {0};
        put(&b, "{");
        for (int i = 0; i < n; i++) {
            char item[64];
            key[i] = rnd(alphabet);
            snprintf(item, sizeof item, "%s\"k%d\": %d", i ? ", " : "", key[i], i);
            put(&b, item);
        }
        put(&b, "}");
        int want = -1;   /* first i with key[j] == key[i] for some j < i */
        for (int i = 0; i < n && want < 0; i++)
            for (int j = 0; j < i; j++)
                if (key[j] == key[i]) {
                    want = i;
                    break;
                }
        loom_error err = {0};
        loom_status s = parse(b.s, &err);
        if (want < 0) {
            CHECK_INT_EQ(s, LOOM_OK);
        } else {
            char where[64];
            snprintf(where, sizeof where, "t.json: $.k%d: duplicate key \"k%d\"", key[want],
                     key[want]);
            CHECK_INT_EQ(s, LOOM_ERR_INVALID);
            CHECK_STR_CONTAINS(err.msg, where);
        }
        free(key);
        free(b.s);
    }
}

static void many_members(void)
{
    buf b = {0};
    put(&b, "{\"a\": {\"nested\": [1, 2, {\"x\": 1}]}");
    for (int i = 0; i < 200000; i++) {
        char item[48];
        snprintf(item, sizeof item, ", \"key%d\": %d", i, i);
        put(&b, item);
    }
    size_t before_tail = b.len;
    put(&b, "}");
    loom_error err = {0};
    CHECK_INT_EQ(parse(b.s, &err), LOOM_OK);

    /* the same object with two late duplicates: the earlier repeat is named */
    b.len = before_tail;
    put(&b, ", \"key199999\": 0, \"key7\": 0}");
    CHECK_INT_EQ(parse(b.s, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "t.json: $.key199999: duplicate key \"key199999\"");
    free(b.s);

    /* a duplicate inside a large object nested in an array */
    buf c = {0};
    put(&c, "{\"list\": [0, {");
    for (int i = 0; i < 1000; i++) {
        char item[48];
        snprintf(item, sizeof item, "%s\"m%d\": %d", i ? ", " : "", i % 999, i);
        put(&c, item);
    }
    put(&c, "}]}");
    CHECK_INT_EQ(parse(c.s, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "$.list[1].m0: duplicate key \"m0\"");
    free(c.s);
}

static void numbers_and_depth(void)
{
    loom_error err = {0};
    CHECK_INT_EQ(parse("{\"x\": [1, 2, 1e999]}", &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "$.x[2]: number out of range (not finite)");
    CHECK_INT_EQ(parse("{\"x\": -1e999}", &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "$.x: number out of range");
    CHECK_INT_EQ(parse("{\"x\": NaN}", &err), LOOM_ERR_PARSE);
    CHECK_STR_CONTAINS(err.msg, "t.json:1:7: malformed JSON");

    /* the root and LOOM_JSON_MAX_DEPTH levels below it parse; one more does not */
    buf b = {0};
    for (int i = 0; i <= LOOM_JSON_MAX_DEPTH; i++) put(&b, "[");
    for (int i = 0; i <= LOOM_JSON_MAX_DEPTH; i++) put(&b, "]");
    CHECK_INT_EQ(parse(b.s, &err), LOOM_OK);
    b.len = 0;
    for (int i = 0; i <= LOOM_JSON_MAX_DEPTH + 1; i++) put(&b, "[");
    for (int i = 0; i <= LOOM_JSON_MAX_DEPTH + 1; i++) put(&b, "]");
    CHECK_INT_EQ(parse(b.s, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "nesting deeper than 64 levels");
    /* far deeper than cJSON's own recursion limit: refused, no stack overflow */
    b.len = 0;
    for (int i = 0; i < 100000; i++) put(&b, "[");
    CHECK(parse(b.s, &err) != LOOM_OK);
    CHECK_STR_CONTAINS(err.msg, "t.json:");
    free(b.s);
}

/* Integer getters: the int64 boundary, fractions, out-of-range values. */
static void integer_limits(void)
{
    static const struct {
        const char *value;
        loom_status want;
        const char *needle;
    } cases[] = {
        {"9007199254740992", LOOM_OK, NULL},   /* 2^53 */
        {"9223372036854775807", LOOM_ERR_INVALID, "expected an integer in"},   /* rounds to 2^63 */
        {"9223372036854775808", LOOM_ERR_INVALID, "expected an integer in"},
        {"-9223372036854775809", LOOM_ERR_INVALID, "expected an integer in"},
        {"1e300", LOOM_ERR_INVALID, "expected an integer in"},
        {"2.5", LOOM_ERR_INVALID, "expected an integer, found 2.5"},
        {"\"7\"", LOOM_ERR_INVALID, "expected an integer, found a string"},
        {"true", LOOM_ERR_INVALID, "expected an integer, found a boolean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[96];
        snprintf(text, sizeof text, "{\"n\": %s}", cases[i].value);
        cJSON *root = NULL;
        loom_error err = {0};
        CHECK_INT_EQ(loom_json_parse("t.json", text, strlen(text), &root, &err), LOOM_OK);
        loom_jctx c = {"t.json", &err};
        int64_t v = -1;
        loom_status s = loom_json_get_int(&c, root, "$", "n", true, 0, INT64_MAX, &v);
        CHECK_INT_EQ(s, cases[i].want);
        if (cases[i].needle) {
            CHECK_STR_CONTAINS(err.msg, "t.json: $.n: ");
            CHECK_STR_CONTAINS(err.msg, cases[i].needle);
        } else {
            CHECK_INT_EQ(v, (int64_t)1 << 53);
        }
        cJSON_Delete(root);
    }
}

static void exact_numbers(void)
{
    const double vals[] = {0.1 + 0.2, 0.0282978994735224 * (1 + 2.2e-16), 1.0 / 3, 6.02214076e23,
                           -5e-324, 1e300, 0, 42, 0.022055146810820547};
    cJSON *plain = cJSON_CreateObject(), *exact = cJSON_CreateObject();
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char k[8];
        snprintf(k, sizeof k, "v%zu", i);
        cJSON_AddNumberToObject(plain, k, vals[i]);
        CHECK(loom_json_add_exact_number(exact, k, vals[i]) != NULL);
    }
    char *tp = loom_json_print(plain), *te = loom_json_print(exact);
    cJSON *rp = cJSON_Parse(tp), *re = cJSON_Parse(te);
    CHECK(rp && re);
    int lossy = 0;
    for (size_t i = 0; rp && re && i < sizeof vals / sizeof vals[0]; i++) {
        char k[8];
        snprintf(k, sizeof k, "v%zu", i);
        lossy += cJSON_GetObjectItem(rp, k)->valuedouble != vals[i];
        CHECK(cJSON_GetObjectItem(re, k)->valuedouble == vals[i]);
    }
    CHECK(lossy > 0);   /* why the helper exists: cJSON's own printing loses 0.1 + 0.2 */
    CHECK_STR_CONTAINS(te, "\"v7\":\t42");   /* short values stay short */
    cJSON_Delete(rp), cJSON_Delete(re), cJSON_Delete(plain), cJSON_Delete(exact);
    free(tp), free(te);
}

/* One value per file; the value budget is spent before cJSON allocates. */
static void trailing_data_and_budget(void)
{
    loom_error err = {0};
    CHECK_INT_EQ(parse("{\"a\": 1} \n\t\r\n", &err), LOOM_OK);
    CHECK_INT_EQ(parse("{\"a\": 1}\n{\"a\": 2}\n", &err), LOOM_ERR_PARSE);
    CHECK_STR_CONTAINS(err.msg, "t.json:2:1: unexpected data after the JSON value");
    CHECK_INT_EQ(parse("[1] x", &err), LOOM_ERR_PARSE);
    CHECK_STR_CONTAINS(err.msg, "t.json:1:5:");
    CHECK_INT_EQ(parse("{}\0{}", &err), LOOM_OK);   /* strlen stops at the NUL */
    cJSON *root = NULL;
    CHECK_INT_EQ(loom_json_parse("t.json", "{}\0{}", 5, &root, &err), LOOM_ERR_PARSE);
    cJSON_Delete(root);

    loom_json_limits lim = {1000, 10};
    const char *ten = "[1,2,3,4,5,6,7,8,9]", *eleven = "[1,2,3,4,5,6,7,8,9,10]";
    CHECK_INT_EQ(loom_json_parse_limited("t.json", ten, strlen(ten), &lim, &root, &err), LOOM_OK);
    cJSON_Delete(root);
    CHECK_INT_EQ(loom_json_parse_limited("t.json", eleven, strlen(eleven), &lim, &root, &err),
                 LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "t.json: $: more than 10 JSON values");
    CHECK(root == NULL);
    /* commas inside strings are not values */
    const char *str = "[\",,,,,,,,,,,,,,,,,,,,,,,,\"]";
    CHECK_INT_EQ(loom_json_parse_limited("t.json", str, strlen(str), &lim, &root, &err), LOOM_OK);
    cJSON_Delete(root);
    lim.max_bytes = 8;
    CHECK_INT_EQ(loom_json_parse_limited("t.json", ten, strlen(ten), &lim, &root, &err),
                 LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "bytes, larger than this kind of file can be (8 bytes)");

    char fmt[32];
    const char *g = " {\"a\": [1, {\"format\": \"x\"}], \"b\": \"}\", \"format\": \"loom-graph/1\"}";
    CHECK(loom_json_peek_top_string(g, strlen(g), "format", fmt, sizeof fmt));
    CHECK(strcmp(fmt, "loom-graph/1") == 0);
    CHECK(!loom_json_peek_top_string(g, strlen(g), "c", fmt, sizeof fmt));
    CHECK(!loom_json_peek_top_string("[1]", 3, "format", fmt, sizeof fmt));
    CHECK(!loom_json_peek_top_string("{\"format\": 1}", 13, "format", fmt, sizeof fmt));
}

int main(void)
{
    duplicates_vs_brute_force();
    many_members();
    numbers_and_depth();
    trailing_data_and_budget();
    integer_limits();
    exact_numbers();
    return check_done();
}
