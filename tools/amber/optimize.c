/* SHADER_OPTIMIZATION: the SPIR-V optimizer over a module.
 *
 * Amber runs spvtools::Optimizer with the pass flags. The SPIRV-Tools C
 * API has no optimizer (libspirv.h only carries optimizer options; the
 * Optimizer is C++), so we run the spirv-opt program of the same
 * SPIRV-Tools with the same flags and target environment: no shell, the
 * flags checked by the parser, the module through temporary files, its
 * messages kept for the ERROR. */
#include "optimize.h"
#include "util/fault.h"
#include "compile.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static bool write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads a whole (small) file: at most max bytes. */
static char *slurp(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && st.st_size >= 0 && (size_t)st.st_size <= max) {
        buf = vf_malloc((size_t)st.st_size + 1);
        size_t got = 0;
        while (buf && got < (size_t)st.st_size) {
            ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (buf) {
            buf[got] = '\0';
            *len = got;
        }
    }
    close(fd);
    return buf;
}

am_opt_result am_optimize(uint32_t env, const am_pipeline *pl, am_spirv *m, char *msg, size_t msg_len)
{
    char dir[] = "/tmp/vkfuse-amber-opt-XXXXXX";
    if (!mkdtemp(dir)) {
        snprintf(msg, msg_len, "cannot make a temporary directory: %s", strerror(errno));
        return AM_OPT_FAILED;
    }
    char in[sizeof dir + 16], out[sizeof dir + 16], err[sizeof dir + 16], envarg[48], name[32];
    snprintf(in, sizeof in, "%s/in.spv", dir);
    snprintf(out, sizeof out, "%s/out.spv", dir);
    snprintf(err, sizeof err, "%s/err.txt", dir);
    am_env_name(env, name, sizeof name);
    snprintf(envarg, sizeof envarg, "--target-env=%s", name);
    am_opt_result rc = AM_OPT_FAILED;
    int fd = open(in, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    bool wrote = fd >= 0 && write_all(fd, m->words, m->n_words * 4);
    if (fd >= 0) close(fd);
    if (!wrote) {
        snprintf(msg, msg_len, "cannot write %s", in);
        goto out;
    }
    char *argv[AM_MAX_OPT_FLAGS + 8];
    int n = 0;
    argv[n++] = "spirv-opt";
    argv[n++] = envarg;
    for (int i = 0; i < pl->n_opt; i++) argv[n++] = (char *)pl->opt[i];
    argv[n++] = in;
    argv[n++] = "-o";
    argv[n++] = out;
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    int e = posix_spawnp(&pid, "spirv-opt", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e) {
        snprintf(msg, msg_len,
                 "SHADER_OPTIMIZATION needs the spirv-opt program (SPIRV-Tools) on PATH: %s; the SPIRV-Tools C "
                 "API has no optimizer",
                 strerror(e));
        rc = AM_OPT_UNAVAILABLE;
        goto out;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    size_t len = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *text = slurp(err, 4096, &len);
        snprintf(msg, msg_len, "spirv-opt %s failed: %s", envarg, text && len ? text : "(no message)");
        free(text);
        for (char *c = msg; *c; c++)
            if (*c == '\n') *c = ' ';
        goto out;
    }
    char *spv = slurp(out, AM_MAX_SOURCE, &len);
    if (!spv || len % 4 || len < 20) {
        free(spv);
        snprintf(msg, msg_len, "spirv-opt wrote no SPIR-V module");
        goto out;
    }
    free(m->words);
    m->words = (uint32_t *)(void *)spv; /* malloc'd: aligned for uint32_t */
    m->n_words = len / 4;
    rc = AM_OPT_OK;
out:
    unlink(in);
    unlink(out);
    unlink(err);
    rmdir(dir);
    return rc;
}
