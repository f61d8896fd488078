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

#define M(T, m) offsetof(T, m)
static const am_feat_struct structs[] = {
    {"VariablePointerFeatures", "VariablePointersFeatures",
     VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VARIABLE_POINTERS_FEATURES, sizeof(VkPhysicalDeviceVariablePointersFeatures),
     "VK_KHR_variable_pointers", VK_API_VERSION_1_1, {"variablePointersStorageBuffer", "variablePointers"},
     {M(VkPhysicalDeviceVariablePointersFeatures, variablePointersStorageBuffer),
      M(VkPhysicalDeviceVariablePointersFeatures, variablePointers)}},
    {"Float16Int8Features", NULL, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
     sizeof(VkPhysicalDeviceShaderFloat16Int8Features), "VK_KHR_shader_float16_int8", VK_API_VERSION_1_2,
     {"shaderFloat16", "shaderInt8"},
     {M(VkPhysicalDeviceShaderFloat16Int8Features, shaderFloat16),
      M(VkPhysicalDeviceShaderFloat16Int8Features, shaderInt8)}},
    {"Storage8BitFeatures", NULL, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES,
     sizeof(VkPhysicalDevice8BitStorageFeatures), "VK_KHR_8bit_storage", VK_API_VERSION_1_2,
     {"storageBuffer8BitAccess", "uniformAndStorageBuffer8BitAccess", "storagePushConstant8"},
     {M(VkPhysicalDevice8BitStorageFeatures, storageBuffer8BitAccess),
      M(VkPhysicalDevice8BitStorageFeatures, uniformAndStorageBuffer8BitAccess),
      M(VkPhysicalDevice8BitStorageFeatures, storagePushConstant8)}},
    {"Storage16BitFeatures", NULL, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
     sizeof(VkPhysicalDevice16BitStorageFeatures), "VK_KHR_16bit_storage", VK_API_VERSION_1_1,
     {"storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess", "storagePushConstant16",
      "storageInputOutput16"},
     {M(VkPhysicalDevice16BitStorageFeatures, storageBuffer16BitAccess),
      M(VkPhysicalDevice16BitStorageFeatures, uniformAndStorageBuffer16BitAccess),
      M(VkPhysicalDevice16BitStorageFeatures, storagePushConstant16),
      M(VkPhysicalDevice16BitStorageFeatures, storageInputOutput16)}},
    {"SubgroupSizeControl", "SubgroupSizeControlFeatures",
     VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
     sizeof(VkPhysicalDeviceSubgroupSizeControlFeatures), "VK_EXT_subgroup_size_control", VK_API_VERSION_1_3,
     {"subgroupSizeControl", "computeFullSubgroups"},
     {M(VkPhysicalDeviceSubgroupSizeControlFeatures, subgroupSizeControl),
      M(VkPhysicalDeviceSubgroupSizeControlFeatures, computeFullSubgroups)}},
    {"ShaderSubgroupExtendedTypesFeatures", NULL,
     VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES,
     sizeof(VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures), "VK_KHR_shader_subgroup_extended_types",
     VK_API_VERSION_1_2, {"shaderSubgroupExtendedTypes"},
     {M(VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures, shaderSubgroupExtendedTypes)}},
    {"ShaderAtomicInt64Features", NULL, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES,
     sizeof(VkPhysicalDeviceShaderAtomicInt64Features), "VK_KHR_shader_atomic_int64", VK_API_VERSION_1_2,
     {"shaderBufferInt64Atomics", "shaderSharedInt64Atomics"},
     {M(VkPhysicalDeviceShaderAtomicInt64Features, shaderBufferInt64Atomics),
      M(VkPhysicalDeviceShaderAtomicInt64Features, shaderSharedInt64Atomics)}},
    {"VulkanMemoryModelFeatures", NULL, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES,
     sizeof(VkPhysicalDeviceVulkanMemoryModelFeatures), "VK_KHR_vulkan_memory_model", VK_API_VERSION_1_2,
     {"vulkanMemoryModel", "vulkanMemoryModelDeviceScope", "vulkanMemoryModelAvailabilityVisibilityChains"},
     {M(VkPhysicalDeviceVulkanMemoryModelFeatures, vulkanMemoryModel),
      M(VkPhysicalDeviceVulkanMemoryModelFeatures, vulkanMemoryModelDeviceScope),
      M(VkPhysicalDeviceVulkanMemoryModelFeatures, vulkanMemoryModelAvailabilityVisibilityChains)}},
    {"ScalarBlockLayoutFeatures", NULL, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SCALAR_BLOCK_LAYOUT_FEATURES,
     sizeof(VkPhysicalDeviceScalarBlockLayoutFeatures), "VK_EXT_scalar_block_layout", VK_API_VERSION_1_2,
     {"scalarBlockLayout"}, {M(VkPhysicalDeviceScalarBlockLayoutFeatures, scalarBlockLayout)}},
    {"ShaderIntegerDotProductFeatures", NULL, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
     sizeof(VkPhysicalDeviceShaderIntegerDotProductFeatures), "VK_KHR_shader_integer_dot_product",
     VK_API_VERSION_1_3, {"shaderIntegerDotProduct"},
     {M(VkPhysicalDeviceShaderIntegerDotProductFeatures, shaderIntegerDotProduct)}},
    {"Maintenance4Features", NULL, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES,
     sizeof(VkPhysicalDeviceMaintenance4Features), "VK_KHR_maintenance4", VK_API_VERSION_1_3, {"maintenance4"},
     {M(VkPhysicalDeviceMaintenance4Features, maintenance4)}},
};

int am_feat_struct_count(void)
{
    return (int)(sizeof structs / sizeof *structs);
}

const am_feat_struct *am_feat_struct_get(int i)
{
    return i >= 0 && i < am_feat_struct_count() ? &structs[i] : NULL;
}

bool am_feature_lookup(const char *name, int *st, size_t *off)
{
    const char *dot = strchr(name, '.');
    if (!dot) {
        for (size_t i = 0; i < sizeof core_features / sizeof *core_features; i++)
            if (!strcmp(name, core_features[i].name)) {
                *st = AM_FEAT_CORE;
                *off = core_features[i].off;
                return true;
            }
        return false;
    }
    size_t n = (size_t)(dot - name);
    for (int i = 0; i < am_feat_struct_count(); i++) {
        const am_feat_struct *s = &structs[i];
        bool match = (strlen(s->name) == n && !strncmp(name, s->name, n)) ||
                     (s->alias && strlen(s->alias) == n && !strncmp(name, s->alias, n));
        if (!match) continue;
        for (int m = 0; m < 5 && s->members[m]; m++)
            if (!strcmp(dot + 1, s->members[m])) {
                *st = i;
                *off = s->offsets[m];
                return true;
            }
        return false;
    }
    return false;
}

bool am_feature_known(const char *name)
{
    int st;
    size_t off;
    return am_feature_lookup(name, &st, &off);
}

bool am_feature_canonical(const char *name, char *out, size_t len)
{
    if (am_feature_known(name)) {
        snprintf(out, len, "%s", name);
        return true;
    }
    for (int i = 0; i < am_feat_struct_count(); i++)
        for (int m = 0; m < 5 && structs[i].members[m]; m++)
            if (!strcmp(name, structs[i].members[m])) {
                snprintf(out, len, "%s.%s", structs[i].name, name);
                return true;
            }
    return false;
}
