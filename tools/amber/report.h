/* Verdict lines, TAP, the summary line and JUnit XML (report.c). */
#ifndef VF_AMBER_REPORT_H
#define VF_AMBER_REPORT_H

#include "am.h"

typedef struct am_report {
    bool tap;
    int n, index;
    int passed, failed, skipped, errors;
} am_report;

void am_report_begin(am_report *r, bool tap, int n_files);
/* One file's verdict: "PASS f", "FAIL f: ...", "SKIP f: ...",
   "ERROR f:line:col: ..." (or the TAP equivalent). */
void am_report_file(am_report *r, const char *path, const am_result *res, bool verbose);
/* Prints "N passed, N failed, N skipped, N errors"; returns the exit
   status (0 only if nothing failed or errored). */
int am_report_end(const am_report *r);
/* Writes a JUnit XML file; 0 on success. */
int am_report_junit(const char *out, const char *const *files, const am_result *const *res, int n);

#endif
