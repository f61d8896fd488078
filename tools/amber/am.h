/* vkfuse amber: the parsed form of an AmberScript or VkScript test.
 *
 * Both parsers produce this one structure, so the executor, the
 * expectation checks and the report know nothing of the two syntaxes.
 * Nothing here touches Vulkan: the parsers are fuzzed without a device.
 * Every array is bounded (AM_MAX_*), every size a parser accepts is
 * capped, and buffer fills are stored as rules, not materialised, so a
 * hostile "SIZE 4000000000 FILL 0" costs nothing until the executor checks
 * it against the device's limits. */
#ifndef VF_AMBER_AM_H
#define VF_AMBER_AM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AM_NAME_MAX 64
#define AM_MAX_OPT_FLAGS 16       /* SHADER_OPTIMIZATION flags per pipeline */
#define AM_OPT_FLAG_MAX 96
#define AM_REQ_NAME_MAX 256       /* feature, property and extension names: any word */
#define AM_MAX_SHADERS 64
#define AM_MAX_BUFFERS 256
#define AM_MAX_PIPELINES 64
#define AM_MAX_SAMPLERS 32
#define AM_FORMAT_MAX 40          /* a VkFormat name without VK_FORMAT_ */
#define AM_MAX_BINDINGS 32        /* per pipeline */
#define AM_MAX_ARRAY 8            /* buffers in one BUFFER_ARRAY binding */
#define AM_MAX_SPECS 32
#define AM_MAX_COMMANDS 100000
#define AM_MAX_FEATURES 64
#define AM_MAX_REPEAT 100000
#define AM_MAX_SET 31
#define AM_MAX_BINDING 4095
#define AM_MAX_BUFFER_BYTES (1ull << 30) /* before the device limit is known */
#define AM_MAX_SOURCE (16u << 20)       /* input files, shader files, BUFFER FILE TEXT */
#define AM_MAX_DATA_FILE (256u << 20)   /* BUFFER FILE BINARY */

typedef enum { AM_PASS, AM_FAIL, AM_SKIP, AM_ERROR } am_status;

/* Where a message points: 1-based line and column; 0 when unknown. */
typedef struct am_pos {
    int line, col;
} am_pos;

/* A verdict and its reason: "file:line:col: message" for an ERROR. */
typedef struct am_result {
    am_status status;
    am_pos pos;
    char msg[1024];
    char detail[4096];           /* -v: buffer dumps, timings */
    bool hung;                   /* the device did not finish: exit without teardown */
} am_result;

/* ---- data types and layout -------------------------------------------- */

typedef enum {
    AM_I8, AM_I16, AM_I32, AM_I64, AM_U8, AM_U16, AM_U32, AM_U64, AM_F16, AM_F32, AM_F64
} am_scalar;

typedef enum { AM_STD430, AM_STD140, AM_PACKED } am_layout;

/* One element of a buffer: scalar, vecN, matCxR (column-major), each
   optionally a runtime-array element (T[]), laid out by `layout`. */
typedef struct am_fmt {
    am_scalar scalar;
    uint8_t rows;                /* components of a vector / rows of a matrix; 1: scalar */
    uint8_t cols;                /* 1 unless a matrix */
    bool array;                  /* T[]: std140 rounds the stride to 16 */
    am_layout layout;
    /* derived by am_fmt_finish */
    uint32_t stride;             /* bytes from one element to the next */
    uint32_t n_comp;             /* rows * cols */
    uint32_t comp_off[16];       /* byte offset of each component in the element */
} am_fmt;

int am_scalar_size(am_scalar s);
bool am_scalar_is_float(am_scalar s);
const char *am_scalar_name(am_scalar s);
/* Computes stride and component offsets (GLSL std140/std430 rules). */
void am_fmt_finish(am_fmt *f);
/* "vec3<float>[] std140" for messages. */
void am_fmt_describe(const am_fmt *f, char *buf, size_t len);

/* A number as written, before it meets a type. */
typedef struct am_num {
    bool is_float;               /* had '.', 'e', "inf" or "nan" */
    bool neg;
    bool hex;
    uint64_t mag;                /* integers: magnitude; hex: the raw bits */
    bool sat;                    /* more than 64 bits: mag is UINT64_MAX (strtoull's answer) */
    double f;
} am_num;

/* Parses a numeric token; false if it is not a number. */
bool am_num_parse(const char *tok, am_num *out);
/* Encodes n as scalar s into raw bits (little-endian, in the low bytes).
   Integers wrap as Amber's do: the 64-bit two's complement of the literal
   (strtoull's value: past 64 bits it saturates), cut to the type's width,
   for signed and unsigned types alike. False with a reason (to follow the
   token as written) for a float literal for an integer type. A hex
   literal is a number for float types too (0x10 is 16.0), as in Amber. */
bool am_num_encode(const am_num *n, am_scalar s, uint64_t *bits, char *why, size_t why_len);
/* Raw bits of a scalar (as read from a buffer) to double / int64 / uint64. */
double am_bits_to_double(uint64_t bits, am_scalar s);
int64_t am_bits_to_i64(uint64_t bits, am_scalar s);
uint64_t am_bits_to_u64(uint64_t bits, am_scalar s);
void am_bits_format(uint64_t bits, am_scalar s, char *buf, size_t len);
uint64_t am_load_bits(const uint8_t *p, am_scalar s);
void am_store_bits(uint8_t *p, am_scalar s, uint64_t bits);
uint16_t am_f32_to_f16(float f);
float am_f16_to_f32(uint16_t h);

/* ---- the test --------------------------------------------------------- */

typedef enum { AM_SRC_GLSL, AM_SRC_SPIRV_ASM, AM_SRC_SPIRV_HEX } am_src_kind;

typedef struct am_shader {
    char name[AM_NAME_MAX];
    am_src_kind kind;
    char *source;                /* NUL-terminated; NULL until a FILE is loaded */
    char file[256];              /* FILE path (relative to the test), "" for inline */
    uint32_t target_env;         /* 0: default; else AM_ENV_* */
    am_pos pos;                  /* the SHADER command */
    int source_line;             /* file line of the first source line */
} am_shader;

/* TARGET_ENV values: spv1.0..spv1.6 and vulkan1.0..1.3. */
enum { AM_ENV_SPV = 0x100, AM_ENV_VULKAN = 0x200 };

typedef enum { AM_INIT_ZERO, AM_INIT_FILL, AM_INIT_SERIES, AM_INIT_DATA } am_init_kind;

typedef struct am_buffer {
    char name[AM_NAME_MAX];
    am_fmt fmt;
    bool has_fmt;                /* false: a bare FORMAT (image) buffer */
    uint64_t elements;           /* SIZE, or DATA values / components */
    uint64_t min_bytes;          /* VkScript: the largest extent written */
    am_init_kind init;
    am_num fill, inc;            /* FILL v; SERIES_FROM fill INC_BY inc */
    uint8_t *data;               /* DATA: elements * stride bytes */
    size_t data_len;
    am_pos pos;
    /* FILE TEXT|BINARY path: loaded by the runner (relative to the test),
       not by the parser, which never touches the file system. */
    char file[256];              /* "" unless FILE */
    bool file_binary;
    am_pos file_pos;             /* the path token */
    /* Images and texel buffers (as Amber's Buffer): the format's name
       ("" when the data type is not a format name: derived from fmt),
       the image extent (1 x 1 x 1 unless WIDTH/HEIGHT/DEPTH or IMAGE),
       mip levels and dimension (0: not given, 2D; 1, 2, 3). */
    char format[AM_FORMAT_MAX];
    uint32_t width, height, depth, mip_levels;
    uint8_t dim;
} am_buffer;

/* SAMPLER name ...: Amber's parameters and defaults (nearest filters,
   repeat, float_transparent_black, lod 0..1, normalized coordinates). */
typedef enum { AM_ADDR_REPEAT, AM_ADDR_MIRRORED_REPEAT, AM_ADDR_CLAMP_TO_EDGE, AM_ADDR_CLAMP_TO_BORDER,
               AM_ADDR_MIRROR_CLAMP_TO_EDGE } am_addr_mode;

typedef struct am_sampler {
    char name[AM_NAME_MAX];
    bool mag_linear, min_linear;
    am_addr_mode addr[3];        /* U, V, W */
    int border;                  /* VkBorderColor value 0..5, in Amber's order */
    float min_lod, max_lod;
    bool unnormalized;
    bool compare;
    int compare_op;              /* VkCompareOp value 0..7 */
    am_pos pos;
} am_sampler;

/* Bytes the buffer needs (elements * stride, at least min_bytes). */
uint64_t am_buffer_bytes(const am_buffer *b);

typedef enum {
    AM_BIND_STORAGE, AM_BIND_UNIFORM, AM_BIND_STORAGE_DYNAMIC, AM_BIND_UNIFORM_DYNAMIC,
    AM_BIND_STORAGE_IMAGE, AM_BIND_SAMPLED_IMAGE, AM_BIND_COMBINED_IMAGE_SAMPLER,
    AM_BIND_UNIFORM_TEXEL, AM_BIND_STORAGE_TEXEL, AM_BIND_SAMPLER,
    AM_BIND_KINDS
} am_bind_kind;

/* The kinds whose descriptors are images (made per RUN from the buffer). */
static inline bool am_bind_is_image(am_bind_kind k)
{
    return k == AM_BIND_STORAGE_IMAGE || k == AM_BIND_SAMPLED_IMAGE || k == AM_BIND_COMBINED_IMAGE_SAMPLER;
}

typedef struct am_binding {
    am_bind_kind kind;
    uint32_t set, binding;
    int n;                       /* 1, or the BUFFER_ARRAY length */
    int buf[AM_MAX_ARRAY];       /* AM_BIND_SAMPLER: sampler indices */
    int sampler;                 /* combined_image_sampler: its SAMPLER; else -1 */
    uint32_t base_mip;           /* images: BASE_MIP_LEVEL */
    uint64_t dyn_offset[AM_MAX_ARRAY];     /* OFFSET (dynamic only) */
    uint64_t desc_offset[AM_MAX_ARRAY];    /* DESCRIPTOR_OFFSET */
    uint64_t desc_range[AM_MAX_ARRAY];     /* DESCRIPTOR_RANGE; UINT64_MAX: whole */
    am_pos pos;
} am_binding;

typedef struct am_spec {
    uint32_t id;
    uint32_t bits;               /* 32-bit value as stored */
} am_spec;

typedef struct am_pipeline {
    char name[AM_NAME_MAX];
    int shader;                  /* -1: none attached */
    char entry[AM_NAME_MAX];
    am_spec spec[AM_MAX_SPECS];
    int n_spec;
    am_binding bind[AM_MAX_BINDINGS];
    int n_bind;
    int push_buf;                /* -1: none */
    /* SHADER_OPTIMIZATION: spirv-opt pass flags for the attached shader */
    char opt[AM_MAX_OPT_FLAGS][AM_OPT_FLAG_MAX];
    int n_opt;
    /* SUBGROUP block */
    bool sg_full, sg_varying;
    uint32_t sg_required;        /* 0: none; AM_SG_MIN / AM_SG_MAX */
    am_pos pos;
} am_pipeline;

#define AM_SG_MIN 0xffffffffu
#define AM_SG_MAX 0xfffffffeu

typedef enum {
    AM_CMP_EQ, AM_CMP_NE, AM_CMP_LT, AM_CMP_LE, AM_CMP_GT, AM_CMP_GE, AM_CMP_APPROX
} am_cmp;

typedef enum {
    AM_CMD_RUN, AM_CMD_REPEAT, AM_CMD_COPY, AM_CMD_EXPECT, AM_CMD_EXPECT_EQ_BUFFER,
    AM_CMD_EXPECT_RMSE, AM_CMD_EXPECT_EMD, AM_CMD_WRITE,
    AM_CMD_EXPECT_PROBE          /* EXPECT b IDX x y SIZE w h EQ_RGB[A] r g b [a] [TOLERANCE t...] */
} am_cmd_kind;

typedef struct am_cmd {
    am_cmd_kind kind;
    am_pos pos;
    int pipeline;                /* RUN */
    uint32_t groups[3];
    bool timed;
    uint32_t count;              /* REPEAT: times */
    uint32_t body;               /* REPEAT: the next `body` commands */
    int buf, buf2;               /* EXPECT, COPY buf TO buf2, WRITE */
    int expect_no;               /* EXPECT#n in messages: 1-based among expectations */
    am_fmt fmt;                  /* EXPECT: how to read the values */
    uint64_t offset;             /* EXPECT IDX / WRITE byte offset */
    am_cmp cmp;
    uint64_t *values;            /* EXPECT: raw bits per component */
    uint32_t n_values;
    double tol[4];
    bool tol_pct[4];
    int n_tol;                   /* 0: none given */
    double tolerance;            /* RMSE / EMD */
    uint8_t *bytes;              /* WRITE */
    size_t n_bytes;
    uint32_t probe[4];           /* PROBE: x, y, width, height in texels */
    double rgba[4];              /* PROBE: expected components, value / 255 as Amber keeps them */
    bool probe_rgba;             /* EQ_RGBA (else EQ_RGB: alpha not compared) */
} am_cmd;

typedef struct am_script {
    bool vkscript;
    am_shader shader[AM_MAX_SHADERS];
    int n_shaders;
    am_buffer buffer[AM_MAX_BUFFERS];
    int n_buffers;
    am_pipeline pipeline[AM_MAX_PIPELINES];
    int n_pipelines;
    am_sampler sampler[AM_MAX_SAMPLERS];
    int n_samplers;
    am_cmd *cmd;
    int n_cmds, cap_cmds;
    int n_expects;
    char feature[AM_MAX_FEATURES][AM_REQ_NAME_MAX];    /* DEVICE_FEATURE */
    int n_features;
    char property[AM_MAX_FEATURES][AM_REQ_NAME_MAX];   /* DEVICE_PROPERTY */
    int n_properties;
    char dev_ext[AM_MAX_FEATURES][AM_REQ_NAME_MAX];
    int n_dev_ext;
    char inst_ext[AM_MAX_FEATURES][AM_REQ_NAME_MAX];
    int n_inst_ext;
    uint32_t fence_timeout_ms;   /* 0: the runner's --timeout */
    uint32_t min_api;            /* VkScript "vulkan 1.x.y"; 0: any */
    uint32_t subgroup_size;      /* VkScript [require] subgroup_size; 0: any */
    char skip[256];              /* not "": the file needs what we do not support */
    am_pos skip_pos;
} am_script;

/* Parses src (len bytes, need not be NUL-terminated). Returns AM_PASS with
   *s filled, AM_SKIP (s->skip says why; the file uses images/graphics) or
   AM_ERROR with res->pos and res->msg. *s must be freed with am_script_free
   whatever the result. */
am_status am_parse(const char *src, size_t len, am_script *s, am_result *res);
am_status am_parse_amber(const char *src, size_t len, am_script *s, am_result *res);
am_status am_parse_vkscript(const char *src, size_t len, am_script *s, am_result *res);
void am_script_free(am_script *s);
/* BUFFER ... FILE TEXT: parses the file's text (len bytes) as DATA values
   for b, up to the end of the file (or an END). Errors point into the file
   (res->pos); the caller says which file. */
am_status am_buffer_parse_text(am_buffer *b, const char *text, size_t len, am_result *res);

/* Appends a zeroed command; NULL when AM_MAX_COMMANDS is reached. */
am_cmd *am_script_add_cmd(am_script *s);

/* Records an error at pos (printf-style); returns AM_ERROR. */
am_status am_fail_at(am_result *res, am_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- host-side checks (check.c) ---------------------------------------- */

/* Evaluates one EXPECT command against buffer contents (data, size bytes;
   data2/size2 for the buffer comparisons). Fills res with FAIL and the
   first differing element, or leaves it alone on success. */
am_status am_check(const am_script *s, const am_cmd *c, const uint8_t *data, uint64_t size,
                   const uint8_t *data2, uint64_t size2, am_result *res);
/* EXPECT b IDX x y SIZE w h EQ_RGB[A] on b's texels (check_probe.c), as
   Amber's Verifier::Probe. */
am_status am_check_probe(const am_script *s, const am_cmd *c, const uint8_t *data, uint64_t size, am_result *res);
/* Materialises a buffer's initial contents into dst (am_buffer_bytes). */
void am_buffer_init(const am_buffer *b, uint8_t *dst, uint64_t bytes);
/* Appends a hex/values dump of a buffer to buf (for -v). */
void am_dump(const am_buffer *b, const uint8_t *data, uint64_t size, char *buf, size_t len);

#endif
