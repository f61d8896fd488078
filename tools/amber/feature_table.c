/* DEVICE_FEATURE tables: see feature_table.h. */
#include "feature_table.h"
#include "parse_util.h"

#include <stdio.h>
#include <string.h>

#define CORE(m) {#m, offsetof(VkPhysicalDeviceFeatures, m)}
static const struct {
    const char *name;
    size_t off;
} core_features[] = {
    CORE(robustBufferAccess),
    CORE(fullDrawIndexUint32),
    CORE(imageCubeArray),
    CORE(independentBlend),
    CORE(geometryShader),
    CORE(tessellationShader),
    CORE(sampleRateShading),
    CORE(dualSrcBlend),
    CORE(logicOp),
    CORE(multiDrawIndirect),
    CORE(drawIndirectFirstInstance),
    CORE(depthClamp),
    CORE(depthBiasClamp),
    CORE(fillModeNonSolid),
    CORE(depthBounds),
    CORE(wideLines),
    CORE(largePoints),
    CORE(alphaToOne),
    CORE(multiViewport),
    CORE(samplerAnisotropy),
    CORE(textureCompressionETC2),
    CORE(textureCompressionASTC_LDR),
    CORE(textureCompressionBC),
    CORE(occlusionQueryPrecise),
    CORE(pipelineStatisticsQuery),
    CORE(vertexPipelineStoresAndAtomics),
    CORE(fragmentStoresAndAtomics),
    CORE(shaderTessellationAndGeometryPointSize),
    CORE(shaderImageGatherExtended),
    CORE(shaderStorageImageExtendedFormats),
    CORE(shaderStorageImageMultisample),
    CORE(shaderStorageImageReadWithoutFormat),
    CORE(shaderStorageImageWriteWithoutFormat),
    CORE(shaderUniformBufferArrayDynamicIndexing),
    CORE(shaderSampledImageArrayDynamicIndexing),
    CORE(shaderStorageBufferArrayDynamicIndexing),
    CORE(shaderStorageImageArrayDynamicIndexing),
    CORE(shaderClipDistance),
    CORE(shaderCullDistance),
    CORE(shaderFloat64),
    CORE(shaderInt64),
    CORE(shaderInt16),
    CORE(shaderResourceResidency),
    CORE(shaderResourceMinLod),
    CORE(sparseBinding),
    CORE(sparseResidencyBuffer),
    CORE(sparseResidencyImage2D),
    CORE(sparseResidencyImage3D),
    CORE(sparseResidency2Samples),
    CORE(sparseResidency4Samples),
    CORE(sparseResidency8Samples),
    CORE(sparseResidency16Samples),
    CORE(sparseResidencyAliased),
    CORE(variableMultisampleRate),
    CORE(inheritedQueries),
};

/* The feature structs of the Vulkan headers (generated). */
#include "amber_features.inc"

/* Amber's own names for some structs, which no header alias gives. */
static const struct {
    const char *amber, *header;
} amber_names[] = {
    {"Storage8BitFeatures", "8BitStorageFeatures"},
    {"Storage16BitFeatures", "16BitStorageFeatures"},
    {"SubgroupSizeControl", "SubgroupSizeControlFeatures"},
    {"Float16Int8Features", "ShaderFloat16Int8Features"},
};

#define P(m) {#m, offsetof(VkPhysicalDeviceFloatControlsProperties, m)}
static const am_feat_member prop_members[] = {
    P(shaderSignedZeroInfNanPreserveFloat16), P(shaderSignedZeroInfNanPreserveFloat32),
    P(shaderSignedZeroInfNanPreserveFloat64), P(shaderDenormPreserveFloat16),
    P(shaderDenormPreserveFloat32),           P(shaderDenormPreserveFloat64),
    P(shaderDenormFlushToZeroFloat16),        P(shaderDenormFlushToZeroFloat32),
    P(shaderDenormFlushToZeroFloat64),        P(shaderRoundingModeRTEFloat16),
    P(shaderRoundingModeRTEFloat32),          P(shaderRoundingModeRTEFloat64),
    P(shaderRoundingModeRTZFloat16),          P(shaderRoundingModeRTZFloat32),
    P(shaderRoundingModeRTZFloat64),
};
static const am_feat_struct prop_structs[] = {
    {"FloatControlsProperties", "FloatControlsPropertiesKHR|", VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES,
     sizeof(VkPhysicalDeviceFloatControlsProperties), "VK_KHR_shader_float_controls", VK_API_VERSION_1_2, 0,
     (int)(sizeof prop_members / sizeof *prop_members)},
};

int am_feat_struct_count(void)
{
    return (int)(sizeof am_gen_structs / sizeof *am_gen_structs);
}

const am_feat_struct *am_feat_struct_get(int i)
{
    return i >= 0 && i < am_feat_struct_count() ? &am_gen_structs[i] : NULL;
}

const am_feat_member *am_feat_member_get(int i)
{
    return i >= 0 && i < (int)(sizeof am_gen_members / sizeof *am_gen_members) ? &am_gen_members[i] : NULL;
}

int am_prop_struct_count(void)
{
    return (int)(sizeof prop_structs / sizeof *prop_structs);
}

const am_feat_struct *am_prop_struct_get(int i)
{
    return i >= 0 && i < am_prop_struct_count() ? &prop_structs[i] : NULL;
}

const am_feat_member *am_prop_member_get(int i)
{
    return i >= 0 && i < (int)(sizeof prop_members / sizeof *prop_members) ? &prop_members[i] : NULL;
}

/* Length of a struct name without its vendor suffix (the capitals after
   "Features"/"Properties": EXT, KHR, NV...). */
static size_t base_len(const char *s, size_t n)
{
    size_t k = n;
    while (k && s[k - 1] >= 'A' && s[k - 1] <= 'Z') k--;
    if (k >= 8 && (!strncmp(s + k - 8, "Features", 8) || (k >= 10 && !strncmp(s + k - 10, "Properties", 10))))
        return k;
    return n;
}

static bool same_base(const char *a, size_t an, const char *b, size_t bn)
{
    an = base_len(a, an);
    bn = base_len(b, bn);
    return an == bn && !strncmp(a, b, an);
}

/* Does struct fs answer to the name s[0..n)? Its name, an alias typedef's,
   either without a vendor suffix. */
static bool struct_named(const am_feat_struct *fs, const char *s, size_t n)
{
    if (same_base(s, n, fs->name, strlen(fs->name))) return true;
    for (const char *a = fs->aliases; *a;) {
        const char *bar = strchr(a, '|');
        if (!bar) break;
        if (same_base(s, n, a, (size_t)(bar - a))) return true;
        a = bar + 1;
    }
    return false;
}

static int find_struct(const char *s, size_t n, const am_feat_struct *tab, int count)
{
    for (size_t i = 0; tab != prop_structs && i < sizeof amber_names / sizeof *amber_names; i++)
        if (strlen(amber_names[i].amber) == n && !strncmp(s, amber_names[i].amber, n)) {
            s = amber_names[i].header;
            n = strlen(s);
            break;
        }
    for (int i = 0; i < count; i++)
        if (!strncmp(tab[i].name, s, n) && !tab[i].name[n]) return i; /* exact first */
    for (int i = 0; i < count; i++)
        if (struct_named(&tab[i], s, n)) return i;
    return -1;
}

am_feat_find am_feature_find(const char *name, int *st, size_t *off)
{
    const char *dot = strchr(name, '.');
    if (!dot) {
        for (size_t i = 0; i < sizeof core_features / sizeof *core_features; i++)
            if (!strcmp(name, core_features[i].name)) {
                *st = AM_FEAT_CORE;
                *off = core_features[i].off;
                return AM_FEAT_FOUND;
            }
        return AM_FEAT_UNKNOWN;
    }
    int i = find_struct(name, (size_t)(dot - name), am_gen_structs, am_feat_struct_count());
    if (i < 0) return dot[1] && !strchr(dot + 1, '.') ? AM_FEAT_UNKNOWN_STRUCT : AM_FEAT_UNKNOWN;
    const am_feat_struct *fs = &am_gen_structs[i];
    for (int m = 0; m < fs->count; m++)
        if (!strcmp(dot + 1, am_gen_members[fs->first + m].name)) {
            *st = i;
            *off = am_gen_members[fs->first + m].offset;
            return AM_FEAT_FOUND;
        }
    return AM_FEAT_UNKNOWN;
}

bool am_feature_lookup(const char *name, int *st, size_t *off)
{
    return am_feature_find(name, st, off) == AM_FEAT_FOUND;
}

bool am_property_lookup(const char *name, int *st, size_t *off)
{
    const char *dot = strchr(name, '.');
    if (!dot) return false;
    int i = find_struct(name, (size_t)(dot - name), prop_structs, am_prop_struct_count());
    if (i < 0) return false;
    for (int m = 0; m < prop_structs[i].count; m++)
        if (!strcmp(dot + 1, prop_members[prop_structs[i].first + m].name)) {
            *st = i;
            *off = prop_members[prop_structs[i].first + m].offset;
            return true;
        }
    return false;
}

bool am_feature_known(const char *name)
{
    int st;
    size_t off;
    return am_feature_lookup(name, &st, &off);
}

/* VkScript names a member alone ("shaderFloat16"): the first struct that
   has it, in header order (older structs first). */
bool am_feature_canonical(const char *name, char *out, size_t len)
{
    if (am_feature_known(name)) {
        snprintf(out, len, "%s", name);
        return true;
    }
    for (int i = 0; i < am_feat_struct_count(); i++) {
        const am_feat_struct *fs = &am_gen_structs[i];
        if (!strncmp(fs->name, "Vulkan1", 7)) continue; /* the aggregate structs: the specific one instead */
        for (int m = 0; m < fs->count; m++)
            if (!strcmp(name, am_gen_members[fs->first + m].name)) {
                snprintf(out, len, "%s.%s", fs->name, name);
                return true;
            }
    }
    return false;
}
