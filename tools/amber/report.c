/* Output formats: see report.h. */
#include "report.h"

#include <stdio.h>
#include <string.h>

void am_report_begin(am_report *r, bool tap, int n_files)
{
    memset(r, 0, sizeof *r);
    r->tap = tap;
    r->n = n_files;
    if (tap) printf("TAP version 13\n1..%d\n", n_files);
    fflush(stdout);
}

/* "path:line:col" when the result has a position. */
static void where(char *buf, size_t len, const char *path, const am_result *res)
{
    if (res->pos.line > 0)
        snprintf(buf, len, "%s:%d:%d", path, res->pos.line, res->pos.col > 0 ? res->pos.col : 1);
    else
        snprintf(buf, len, "%s", path);
}

void am_report_file(am_report *r, const char *path, const am_result *res, bool verbose)
{
    char w[4200];
    r->index++;
    switch (res->status) {
    case AM_PASS: r->passed++; break;
    case AM_FAIL: r->failed++; break;
    case AM_SKIP: r->skipped++; break;
    default: r->errors++; break;
    }
    if (r->tap) {
        where(w, sizeof w, path, res);
        switch (res->status) {
        case AM_PASS: printf("ok %d - %s\n", r->index, path); break;
        case AM_SKIP: printf("ok %d - %s # SKIP %s\n", r->index, path, res->msg); break;
        case AM_FAIL: printf("not ok %d - %s\n  # FAIL %s\n", r->index, path, res->msg); break;
        default: printf("not ok %d - %s\n  # ERROR %s: %s\n", r->index, path, w, res->msg); break;
        }
    } else {
        switch (res->status) {
        case AM_PASS: printf("PASS %s\n", path); break;
        case AM_SKIP: printf("SKIP %s: %s\n", path, res->msg); break;
        case AM_FAIL: printf("FAIL %s: %s\n", path, res->msg); break;
        default:
            where(w, sizeof w, path, res);
            printf("ERROR %s: %s\n", w, res->msg);
            break;
        }
    }
    if (res->detail[0] && (verbose || res->status == AM_PASS)) {
        /* TIMED_EXECUTION lines and -v dumps; '#'-prefixed under TAP. */
        const char *p = res->detail;
        while (*p) {
            const char *e = strchr(p, '\n');
            int n = e ? (int)(e - p) : (int)strlen(p);
            if (verbose || strstr(p, "TIMED_EXECUTION") == p + 2)
                printf("%s%.*s\n", r->tap ? "#" : "", n, p);
            p += n + (e ? 1 : 0);
        }
    }
    fflush(stdout);
}

int am_report_end(const am_report *r)
{
    printf("%d passed, %d failed, %d skipped, %d errors\n", r->passed, r->failed, r->skipped, r->errors);
    fflush(stdout);
    return r->failed || r->errors ? 1 : 0;
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '&') fputs("&amp;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c < 0x20 && c != '\n' && c != '\t') fputc('?', f);
        else fputc(c, f);
    }
}

int am_report_junit(const char *out, const char *const *files, const am_result *const *res, int n)
{
    FILE *f = fopen(out, "w");
    if (!f) return -1;
    int counts[4] = {0};
    for (int i = 0; i < n; i++) counts[res[i]->status]++;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<testsuite name=\"vkfuse amber\" tests=\"%d\" failures=\"%d\" skipped=\"%d\" errors=\"%d\">\n", n,
            counts[AM_FAIL], counts[AM_SKIP], counts[AM_ERROR]);
    for (int i = 0; i < n; i++) {
        fputs("  <testcase classname=\"amber\" name=\"", f);
        xml_text(f, files[i]);
        fputs("\">", f);
        const am_result *r = res[i];
        char w[4200];
        where(w, sizeof w, files[i], r);
        if (r->status == AM_FAIL || r->status == AM_ERROR) {
            fputs(r->status == AM_FAIL ? "<failure message=\"" : "<error message=\"", f);
            if (r->status == AM_ERROR) {
                xml_text(f, w);
                fputs(": ", f);
            }
            xml_text(f, r->msg);
            fputs("\">", f);
            xml_text(f, r->detail);
            fputs(r->status == AM_FAIL ? "</failure>" : "</error>", f);
        } else if (r->status == AM_SKIP) {
            fputs("<skipped message=\"", f);
            xml_text(f, r->msg);
            fputs("\"/>", f);
        }
        fputs("</testcase>\n", f);
    }
    fputs("</testsuite>\n", f);
    return fclose(f) == 0 ? 0 : -1;
}
