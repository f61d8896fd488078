/* libFuzzer target for the AmberScript and VkScript parsers.
 *
 * Built twice by run.sh: -DFUZZ_VKSCRIPT picks the VkScript parser, else
 * AmberScript. The parsers touch no device, so the whole parse (and the
 * freeing of what it built) runs under ASan/UBSan; any crash, leak, hang
 * or oversized allocation is a bug to fix in tools/amber. */
#include "am.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    am_script *s = calloc(1, sizeof *s);
    if (!s) return 0;
    am_result res = {0};
#ifdef FUZZ_VKSCRIPT
    am_status st = am_parse_vkscript((const char *)data, size, s, &res);
#else
    am_status st = am_parse_amber((const char *)data, size, s, &res);
#endif
    if (st != AM_PASS) {
        am_script_free(s);
        free(s);
        return 0;
    }
    /* Evaluate every EXPECT against a small zeroed buffer: the checks must
       stay in bounds whatever the parser accepted. */
    static uint8_t zero[256];
    for (int i = 0; i < s->n_cmds; i++) {
        am_cmd *c = &s->cmd[i];
        if (c->kind == AM_CMD_EXPECT || c->kind == AM_CMD_EXPECT_EQ_BUFFER || c->kind == AM_CMD_EXPECT_RMSE ||
            c->kind == AM_CMD_EXPECT_EMD) {
            am_result r = {0};
            am_check(s, c, zero, sizeof zero, zero, sizeof zero, &r);
        }
    }
    for (int i = 0; i < s->n_buffers; i++) {
        uint64_t n = am_buffer_bytes(&s->buffer[i]);
        if (n <= sizeof zero) am_buffer_init(&s->buffer[i], zero, n);
    }
    am_script_free(s);
    free(s);
    return 0;
}
