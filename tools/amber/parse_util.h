/* Small parsing helpers both parsers share (parse_util.c), and the
   device-feature name table (feature_table.c). */
#ifndef VF_AMBER_PARSE_UTIL_H
#define VF_AMBER_PARSE_UTIL_H

#include "am.h"

#include <stdbool.h>
#include <stdint.h>

/* Decimal or 0x hex, <= max. */
bool am_parse_uint(const char *s, uint64_t max, uint64_t *out);
/* "spv1.3", "vulkan1.1", ... -> AM_ENV_* | minor. */
bool am_parse_target_env(const char *s, uint32_t *out);
/* AmberScript data type (int32, vec3<float>, mat2x3<double>[], ...) or an
   image format name (R32G32B32A32_SFLOAT). Returns 1 for a data type, 2
   for a format it can lay out, -1 for a format it cannot (packed, depth),
   0 for neither. Leaves layout to the caller, and calls nothing else. */
int am_parse_type(const char *s, am_fmt *out);
/* Records a format name (one am_parse_type returned 2 for) in b->format. */
void am_set_format(am_buffer *b, const char *name);
/* VkScript / GLSL type names: float, vec4, ivec2, dmat3x4, u8vec2, ... */
bool am_parse_glsl_type(const char *s, am_fmt *out);

/* DEVICE_FEATURE names: "shaderInt64" or "Struct.member". */
bool am_feature_known(const char *name);
/* VkScript [require]: a bare member name of a known feature struct, turned
   into the "Struct.member" form (or kept for VkPhysicalDeviceFeatures). */
bool am_feature_canonical(const char *name, char *out, size_t len);

#endif
