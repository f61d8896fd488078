/* DEVICE_FEATURE names -> where the VkBool32 lives.
 *
 * "shaderInt64" is a member of VkPhysicalDeviceFeatures; "Struct.member"
 * (Amber's short struct names, e.g. Float16Int8Features.shaderFloat16)
 * is a member of an extension feature struct. Pure tables: no Vulkan
 * calls, so the parsers can use them under the fuzzer. */
#ifndef VF_AMBER_FEATURES_H
#define VF_AMBER_FEATURES_H

#include <vulkan/vulkan.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct am_feat_struct {
    const char *name;            /* Amber's name */
    const char *alias;           /* another accepted name, or NULL */
    VkStructureType stype;
    size_t size;
    const char *ext;             /* device extension before `core` */
    uint32_t core;               /* VK_API_VERSION_1_x it became core in */
    const char *members[5];
    size_t offsets[5];
} am_feat_struct;

#define AM_FEAT_CORE (-1)

int am_feat_struct_count(void);
const am_feat_struct *am_feat_struct_get(int i);
/* Finds a feature: *st is AM_FEAT_CORE or a struct index; *off the
   VkBool32's byte offset in VkPhysicalDeviceFeatures or that struct. */
bool am_feature_lookup(const char *name, int *st, size_t *off);

#endif
