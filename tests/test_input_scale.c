/*
 * test_input_scale.c — readers stay fast on large inputs and keep their
 * duplicate rules while doing so (issue 9: never hang).
 *
 * The profile db reader once inserted entries one at a time into a sorted
 * array: a 20 000-entry file in reverse key order moved the whole array for
 * every entry (11 s). It now sorts once; this test loads such a file (ctest's
 * timeout catches a regression; there is no timing assertion) and checks
 * that the result is the same db as the same entries in order, and that a
 * duplicate is still reported at the first entry, in file order, whose key
 * an earlier entry has — against a brute-force reference on random files.
 *
 * The launch-script reader (planner/import/shell_words.c) looked variables up
 * linearly and joined arrays with repeated strcat: a 50 000-variable chain
 * took 9 s, a 200 000-element array 20 s. Both must now parse, with the
 * values bash would give them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "costs/profile_db.h"
#include "planner/import/shell_words.h"

static char dir[64];
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int rnd(int n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int)(rng % (uint64_t)n);
}

/* Writes a db whose entry i is an einsum of s = sizes[i] (fwd = 1000 + s). */
static const char *write_db(const char *name, const int *sizes, int n)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) exit(2);
    fprintf(f, "{\"format\": \"loom-profile/1\", \"device\": \"NVIDIA H100 80GB HBM3\", \"entries\": [");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\n{\"op\": \"einsum\", \"sig\": \"bsh,hf->bsf\", \"dtype\": \"bf16\", "
                   "\"shape\": {\"b\": 1, \"s\": %d, \"h\": 8192, \"f\": 3584}, "
                   "\"fwd_ns\": %d, \"bwd_ns\": %d}",
                i ? "," : "", sizes[i], 1000 + sizes[i], 2000 + sizes[i]);
    fprintf(f, "]}\n");
    fclose(f);
    return path;
}

static void large_reversed_file(void)
{
    enum { N = 20000 };
    int *s = malloc(N * sizeof *s);
    for (int i = 0; i < N; i++) s[i] = N - i;   /* reverse key order */
    loom_error err = {0};
    loom_profile_db *db = NULL;
    CHECK_INT_EQ(loom_profile_db_load(write_db("reversed.json", s, N), &db, &err), LOOM_OK);
    CHECK_INT_EQ(loom_profile_db_count(db), N);
    /* held in key order: entry i has s = i + 1 and its own times */
    bool ordered = true;
    for (int32_t i = 0; db && i < loom_profile_db_count(db); i++) {
        const loom_profile_entry *e = loom_profile_db_entry(db, i);
        ordered = ordered && loom_profile_key_dim(&e->key, "s") == i + 1 && e->fwd_ns == 1000 + i + 1;
    }
    CHECK(ordered);
    loom_profile_db_destroy(db);

    /* the same file with entry 12345 repeating entry 7's key */
    s[12345] = s[7];
    CHECK_INT_EQ(loom_profile_db_load(write_db("reversed-dup.json", s, N), &db, &err),
                 LOOM_ERR_INVALID);
    CHECK(db == NULL);
    CHECK_STR_CONTAINS(err.msg, "reversed-dup.json: $.entries[12345]: duplicate entry");
    free(s);
}

/* Random small files: the reported duplicate is the first repeat in file order. */
static void duplicates_vs_brute_force(void)
{
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + rnd(30), s[30];
        for (int i = 0; i < n; i++) s[i] = 1 + rnd(2 * n);
        int want = -1;
        for (int i = 0; i < n && want < 0; i++)
            for (int j = 0; j < i; j++)
                if (s[j] == s[i]) {
                    want = i;
                    break;
                }
        loom_error err = {0};
        loom_profile_db *db = NULL;
        loom_status st = loom_profile_db_load(write_db("random.json", s, n), &db, &err);
        if (want < 0) {
            CHECK_INT_EQ(st, LOOM_OK);
            CHECK_INT_EQ(loom_profile_db_count(db), n);
        } else {
            char where[64];
            snprintf(where, sizeof where, "$.entries[%d]: duplicate entry", want);
            CHECK_INT_EQ(st, LOOM_ERR_INVALID);
            CHECK_STR_CONTAINS(err.msg, where);
        }
        loom_profile_db_destroy(db);
    }
}

/* V0=8, V1=$V0, …, V50000=$V49999: the last is 8. A=( w0 … w199999 ) and
 * B=( ${A[@]} ${A[@]} ): B joins 400 000 words with spaces. */
static void large_launch_scripts(void)
{
    enum { NV = 50000, NA = 200000 };
    char *text = malloc((size_t)NV * 24 + (size_t)NA * 10 + 256), *p = text;
    p += sprintf(p, "V0=8\n");
    for (int i = 1; i <= NV; i++) p += sprintf(p, "V%d=$V%d\n", i, i - 1);
    p += sprintf(p, "A=(");
    size_t a_len = 0;
    for (int i = 0; i < NA; i++) {
        int n = sprintf(p, " w%d", i);
        p += n;
        a_len += (size_t)n;   /* the words and the spaces between them, plus one */
    }
    sprintf(p, " )\nB=(${A[@]} ${A[@]})\ntorchrun pretrain_gpt.py\n");
    loom_error err = {0};
    loom_sh_script *s = NULL;
    CHECK_INT_EQ(loom_sh_parse("big.sh", text, &s, &err), LOOM_OK);
    if (s) {
        char name[16];
        snprintf(name, sizeof name, "V%d", NV);
        CHECK(loom_sh_var(s, name) && strcmp(loom_sh_var(s, name), "8") == 0);
        const char *a = loom_sh_var(s, "A"), *b = loom_sh_var(s, "B");
        CHECK_INT_EQ(a ? strlen(a) : 0, a_len - 1);
        CHECK_INT_EQ(b ? strlen(b) : 0, 2 * (a_len - 1) + 1);
        CHECK(a && strncmp(a, "w0 w1 w2 ", 9) == 0 && strcmp(a + strlen(a) - 8, " w199999") == 0);
        CHECK_INT_EQ(loom_sh_command_count(s), 1);
    }
    loom_sh_destroy(s);
    free(text);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/loom-scale-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    large_reversed_file();
    duplicates_vs_brute_force();
    large_launch_scripts();
    char p[128];
    const char *names[] = {"reversed.json", "reversed-dup.json", "random.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        remove(p);
    }
    rmdir(dir);
    return check_done();
}
