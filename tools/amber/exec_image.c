/* Images, samplers and texel buffers for compute tests, done as Amber
 * does them (src/vulkan/{image_descriptor,transfer_image,pipeline}.cc):
 *
 * - The buffer's bytes are the image's texels, tightly packed (rows of
 *   WIDTH texels, then HEIGHT rows, then DEPTH slices).
 * - Each RUN makes the images afresh: optimal tiling, device-local, usage
 *   TRANSFER_SRC | TRANSFER_DST | STORAGE or SAMPLED; a copy from the
 *   buffer into every mip level from the binding's BASE_MIP_LEVEL up,
 *   each level reading from the start of the buffer (Amber's regions all
 *   have bufferOffset 0); the shader sees the image in GENERAL layout
 *   through a view of the levels from BASE_MIP_LEVEL up.
 * - After the dispatch, storage images are copied back into the buffer,
 *   level by level in the same order (each overwriting the start of the
 *   buffer, as Amber's one copy with overlapping regions ends up on
 *   lavapipe, which applies regions in order); sampled images are read
 *   only. The buffer then holds WIDTH x HEIGHT x DEPTH texels, as in Amber.
 * - Texel buffers are views of the whole buffer in its format.
 *
 * Layout transitions are exact, for the validation layer: UNDEFINED ->
 * TRANSFER_DST_OPTIMAL -> GENERAL before the dispatch, GENERAL ->
 * TRANSFER_SRC_OPTIMAL after it, over all mip levels, with the access
 * masks and stages of the work on each side. */
#include "exec.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define VK (&x->dev.vkd)
#define IMG (&x->img)
#define DEV (x->dev.device)

#define F(n) {#n, VK_FORMAT_##n}
static const struct {
    const char *name;
    VkFormat vk;
} formats[] = {
    /* The formats with equal-width 8/16/32/64-bit components that the
       parsers accept as numeric data (types.c / parse_util.c). */
    F(R8_UNORM), F(R8_SNORM), F(R8_USCALED), F(R8_SSCALED), F(R8_UINT), F(R8_SINT), F(R8_SRGB), F(R8G8_UNORM),
    F(R8G8_SNORM), F(R8G8_USCALED), F(R8G8_SSCALED), F(R8G8_UINT), F(R8G8_SINT), F(R8G8_SRGB),
    F(R8G8B8_UNORM), F(R8G8B8_SNORM), F(R8G8B8_USCALED), F(R8G8B8_SSCALED), F(R8G8B8_UINT), F(R8G8B8_SINT),
    F(R8G8B8_SRGB), F(R8G8B8A8_UNORM), F(R8G8B8A8_SNORM), F(R8G8B8A8_USCALED), F(R8G8B8A8_SSCALED),
    F(R8G8B8A8_UINT), F(R8G8B8A8_SINT), F(R8G8B8A8_SRGB), F(B8G8R8_UNORM), F(B8G8R8_SNORM), F(B8G8R8_USCALED),
    F(B8G8R8_SSCALED), F(B8G8R8_UINT), F(B8G8R8_SINT), F(B8G8R8_SRGB), F(B8G8R8A8_UNORM), F(B8G8R8A8_SNORM),
    F(B8G8R8A8_USCALED), F(B8G8R8A8_SSCALED), F(B8G8R8A8_UINT), F(B8G8R8A8_SINT), F(B8G8R8A8_SRGB),
    F(R16_UNORM), F(R16_SNORM), F(R16_USCALED), F(R16_SSCALED), F(R16_UINT), F(R16_SINT), F(R16_SFLOAT),
    F(R16G16_UNORM), F(R16G16_SNORM), F(R16G16_USCALED), F(R16G16_SSCALED), F(R16G16_UINT), F(R16G16_SINT),
    F(R16G16_SFLOAT), F(R16G16B16_UNORM), F(R16G16B16_SNORM), F(R16G16B16_USCALED), F(R16G16B16_SSCALED),
    F(R16G16B16_UINT), F(R16G16B16_SINT), F(R16G16B16_SFLOAT), F(R16G16B16A16_UNORM), F(R16G16B16A16_SNORM),
    F(R16G16B16A16_USCALED), F(R16G16B16A16_SSCALED), F(R16G16B16A16_UINT), F(R16G16B16A16_SINT),
    F(R16G16B16A16_SFLOAT), F(R32_UINT), F(R32_SINT), F(R32_SFLOAT), F(R32G32_UINT), F(R32G32_SINT),
    F(R32G32_SFLOAT), F(R32G32B32_UINT), F(R32G32B32_SINT), F(R32G32B32_SFLOAT), F(R32G32B32A32_UINT),
    F(R32G32B32A32_SINT), F(R32G32B32A32_SFLOAT), F(R64_UINT), F(R64_SINT), F(R64_SFLOAT), F(R64G64_UINT),
    F(R64G64_SINT), F(R64G64_SFLOAT), F(R64G64B64_UINT), F(R64G64B64_SINT), F(R64G64B64_SFLOAT),
    F(R64G64B64A64_UINT), F(R64G64B64A64_SINT), F(R64G64B64A64_SFLOAT),
};
#undef F

static uint32_t or1(uint32_t v)
{
    return v ? v : 1;
}

static bool is_texel(am_bind_kind k)
{
    return k == AM_BIND_UNIFORM_TEXEL || k == AM_BIND_STORAGE_TEXEL;
}

/* The buffer's VkFormat: its format name, or for a DATA_TYPE the format
   of the same components (vec4<float> is R32G32B32A32_SFLOAT) when the
   element is exactly one texel. VK_FORMAT_UNDEFINED when there is none. */
static VkFormat buffer_format(const am_buffer *b, char *name, size_t len)
{
    char derived[AM_FORMAT_MAX] = "";
    const char *n = b->format;
    if (!n[0]) {
        const am_fmt *f = &b->fmt;
        int bits = am_scalar_size(f->scalar) * 8;
        if (f->cols == 1 && f->rows >= 1 && f->rows <= 4 && f->stride == (uint32_t)(f->rows * bits / 8)) {
            size_t o = 0;
            for (int i = 0; i < f->rows; i++) o += (size_t)snprintf(derived + o, sizeof derived - o, "%c%d", "RGBA"[i], bits);
            snprintf(derived + o, sizeof derived - o, "_%s",
                     am_scalar_is_float(f->scalar) ? "SFLOAT"
                     : (f->scalar == AM_I8 || f->scalar == AM_I16 || f->scalar == AM_I32 || f->scalar == AM_I64) ? "SINT"
                                                                                                         : "UINT");
        }
        n = derived;
    }
    snprintf(name, len, "%s", n[0] ? n : "(none)");
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(formats[i].name, n)) return formats[i].vk;
    return VK_FORMAT_UNDEFINED;
}

static VkImageType image_type(const am_buffer *b)
{
    return b->dim == 1 ? VK_IMAGE_TYPE_1D : b->dim == 3 ? VK_IMAGE_TYPE_3D : VK_IMAGE_TYPE_2D;
}

static am_status skip(am_result *res, const char *fmt, const char *a, const char *b)
{
    res->status = AM_SKIP;
    res->pos = (am_pos){0, 0};
    snprintf(res->msg, sizeof res->msg, fmt, a, b);
    return AM_SKIP;
}

static bool load(am_exec *x)
{
    if (x->img_loaded) return true;
    vf_vk_device *d = &x->dev;
#define LOAD(n) IMG->n = (PFN_##n)d->vki.vkGetDeviceProcAddr(DEV, #n);
    AM_IMG_DEVICE_FUNCS(LOAD)
#undef LOAD
    IMG->vkGetPhysicalDeviceFormatProperties =
        (PFN_vkGetPhysicalDeviceFormatProperties)d->loader.gipa(d->instance, "vkGetPhysicalDeviceFormatProperties");
    IMG->vkGetPhysicalDeviceImageFormatProperties = (PFN_vkGetPhysicalDeviceImageFormatProperties)d->loader.gipa(
        d->instance, "vkGetPhysicalDeviceImageFormatProperties");
    bool ok = IMG->vkGetPhysicalDeviceFormatProperties && IMG->vkGetPhysicalDeviceImageFormatProperties;
#define CHECK(n) ok = ok && IMG->n;
    AM_IMG_DEVICE_FUNCS(CHECK)
#undef CHECK
    x->img_loaded = ok;
    return ok;
}

/* The usage a buffer's image needs across all pipelines of the script. */
static VkImageUsageFlags image_usage(const am_script *s, int buf)
{
    VkImageUsageFlags u = 0;
    for (int i = 0; i < s->n_pipelines; i++)
        for (int j = 0; j < s->pipeline[i].n_bind; j++) {
            const am_binding *b = &s->pipeline[i].bind[j];
            for (int k = 0; k < b->n && b->kind != AM_BIND_SAMPLER; k++)
                if (b->buf[k] == buf && am_bind_is_image(b->kind))
                    u |= b->kind == AM_BIND_STORAGE_IMAGE ? VK_IMAGE_USAGE_STORAGE_BIT : VK_IMAGE_USAGE_SAMPLED_BIT;
        }
    return u ? u | VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT : 0;
}

/* One image / texel binding: its format supported for that use. */
static am_status check_binding(am_exec *x, const am_script *s, const am_binding *b, int k, am_result *res)
{
    const am_buffer *buf = &s->buffer[b->buf[k]];
    char name[AM_FORMAT_MAX + 8];
    VkFormat vf = buffer_format(buf, name, sizeof name);
    if (vf == VK_FORMAT_UNDEFINED)
        return am_fail_at(res, b->pos, "buffer '%s' has no image format (data type %s): give it a FORMAT or a "
                                       "format-named DATA_TYPE", buf->name, name);
    VkFormatProperties fp;
    IMG->vkGetPhysicalDeviceFormatProperties(x->dev.phys, vf, &fp);
    if (is_texel(b->kind)) {
        VkFormatFeatureFlags need = b->kind == AM_BIND_STORAGE_TEXEL ? VK_FORMAT_FEATURE_STORAGE_TEXEL_BUFFER_BIT
                                                                     : VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT;
        if ((fp.bufferFeatures & need) != need)
            return skip(res, "device lacks format %s for %s", name,
                        b->kind == AM_BIND_STORAGE_TEXEL ? "storage texel buffers" : "uniform texel buffers");
        uint64_t texels = am_buffer_bytes(buf) / buf->fmt.stride;
        if (texels > x->dev.props.limits.maxTexelBufferElements)
            return am_fail_at(res, b->pos, "texel buffer '%s' has %" PRIu64 " texels, the device allows %u", buf->name,
                              texels, x->dev.props.limits.maxTexelBufferElements);
        return AM_PASS;
    }
    VkFormatFeatureFlags need = VK_FORMAT_FEATURE_TRANSFER_SRC_BIT | VK_FORMAT_FEATURE_TRANSFER_DST_BIT;
    need |= b->kind == AM_BIND_STORAGE_IMAGE ? VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT : VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT;
    if (b->kind == AM_BIND_COMBINED_IMAGE_SAMPLER && b->sampler >= 0 &&
        (s->sampler[b->sampler].mag_linear || s->sampler[b->sampler].min_linear))
        need |= VK_FORMAT_FEATURE_SAMPLED_IMAGE_FILTER_LINEAR_BIT;
    if ((fp.optimalTilingFeatures & need) != need)
        return skip(res, "device lacks format %s for %s", name,
                    b->kind == AM_BIND_STORAGE_IMAGE ? "storage images"
                    : (need & VK_FORMAT_FEATURE_SAMPLED_IMAGE_FILTER_LINEAR_BIT) ? "sampled images with linear filtering"
                                                                                 : "sampled images");
    VkImageFormatProperties ip;
    VkResult r = IMG->vkGetPhysicalDeviceImageFormatProperties(x->dev.phys, vf, image_type(buf), VK_IMAGE_TILING_OPTIMAL,
                                                               image_usage(s, b->buf[k]), 0, &ip);
    if (r == VK_ERROR_FORMAT_NOT_SUPPORTED) return skip(res, "device lacks %s images of this type and use%s", name, "");
    if (r != VK_SUCCESS)
        return am_fail_at(res, b->pos, "vkGetPhysicalDeviceImageFormatProperties: %s", vf_vk_result_name(r));
    uint32_t w = or1(buf->width), h = or1(buf->height), d = or1(buf->depth), levels = or1(buf->mip_levels);
    if (w > ip.maxExtent.width || h > ip.maxExtent.height || d > ip.maxExtent.depth) {
        char ext[64];
        snprintf(ext, sizeof ext, "%ux%ux%u", w, h, d);
        return skip(res, "device lacks %s images as large as %s", name, ext);
    }
    uint32_t big = w > h ? w : h, full = 1;
    if (d > big && buf->dim == 3) big = d;
    while (big >>= 1) full++;
    if (levels > full)
        return am_fail_at(res, buf->pos, "MIP_LEVELS %u is more than image '%s' has (%u)", levels, buf->name, full);
    if (levels > ip.maxMipLevels) return skip(res, "device lacks %s images with that many mip levels%s", name, "");
    return AM_PASS;
}

static VkSamplerAddressMode addr_mode(am_addr_mode m)
{
    switch (m) {
    case AM_ADDR_MIRRORED_REPEAT: return VK_SAMPLER_ADDRESS_MODE_MIRRORED_REPEAT;
    case AM_ADDR_CLAMP_TO_EDGE: return VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE;
    case AM_ADDR_CLAMP_TO_BORDER: return VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_BORDER;
    case AM_ADDR_MIRROR_CLAMP_TO_EDGE: return VK_SAMPLER_ADDRESS_MODE_MIRROR_CLAMP_TO_EDGE;
    default: return VK_SAMPLER_ADDRESS_MODE_REPEAT;
    }
}

am_status am_img_setup(am_exec *x, const am_script *s, am_result *res)
{
    bool any = s->n_samplers > 0;
    for (int i = 0; i < s->n_pipelines && !any; i++)
        for (int j = 0; j < s->pipeline[i].n_bind; j++) any |= s->pipeline[i].bind[j].kind > AM_BIND_UNIFORM_DYNAMIC;
    if (!any) return AM_PASS;
    if (!load(x)) return am_fail_at(res, (am_pos){0, 0}, "the Vulkan driver lacks the image entry points");
    for (int i = 0; i < s->n_pipelines; i++)
        for (int j = 0; j < s->pipeline[i].n_bind; j++) {
            const am_binding *b = &s->pipeline[i].bind[j];
            if (b->kind <= AM_BIND_UNIFORM_DYNAMIC || b->kind == AM_BIND_SAMPLER) continue;
            for (int k = 0; k < b->n; k++) {
                am_status st = check_binding(x, s, b, k, res);
                if (st != AM_PASS) return st;
            }
        }
    for (int i = 0; i < s->n_samplers; i++) {
        const am_sampler *sm = &s->sampler[i];
        if (sm->addr[0] == AM_ADDR_MIRROR_CLAMP_TO_EDGE || sm->addr[1] == AM_ADDR_MIRROR_CLAMP_TO_EDGE ||
            sm->addr[2] == AM_ADDR_MIRROR_CLAMP_TO_EDGE)
            /* Core only with the samplerMirrorClampToEdge feature (1.2),
               which Amber does not enable either. */
            return skip(res, "sampler '%s' uses mirror_clamp_to_edge (needs samplerMirrorClampToEdge)%s", sm->name, "");
        VkSamplerCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
                                  .magFilter = sm->mag_linear ? VK_FILTER_LINEAR : VK_FILTER_NEAREST,
                                  .minFilter = sm->min_linear ? VK_FILTER_LINEAR : VK_FILTER_NEAREST,
                                  .mipmapMode = VK_SAMPLER_MIPMAP_MODE_NEAREST, /* Amber has no MIPMAP_MODE */
                                  .addressModeU = addr_mode(sm->addr[0]),
                                  .addressModeV = addr_mode(sm->addr[1]),
                                  .addressModeW = addr_mode(sm->addr[2]),
                                  .compareEnable = sm->compare,
                                  .compareOp = (VkCompareOp)sm->compare_op,
                                  .minLod = sm->min_lod,
                                  .maxLod = sm->max_lod,
                                  .borderColor = (VkBorderColor)sm->border,
                                  .unnormalizedCoordinates = sm->unnormalized};
        VkResult r = VF_VK_CALL(&x->dev, x->img, vkCreateSampler, DEV, &ci, NULL, &x->sampler[i]);
        if (r != VK_SUCCESS) return am_fail_at(res, sm->pos, "vkCreateSampler failed: %s", vf_vk_result_name(r));
    }
    return AM_PASS;
}

static uint32_t memory_type(const am_exec *x, uint32_t bits)
{
    const VkPhysicalDeviceMemoryProperties *mp = &x->dev.mem_props;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
            if ((bits & (1u << i)) &&
                (pass || (mp->memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)))
                return i;
    return UINT32_MAX;
}

/* The RUN's image for buffer `buf`, made on first use. */
static am_status get_image(am_exec *x, const am_script *s, int buf, const am_binding *b, am_pos pos,
                           am_run_image **out, am_result *res)
{
    am_run_res *rr = &x->run;
    for (int i = 0; i < rr->n_img; i++)
        if (rr->img[i].buf == buf) {
            rr->img[i].read_back |= b->kind == AM_BIND_STORAGE_IMAGE;
            *out = &rr->img[i];
            return AM_PASS;
        }
    const am_buffer *ab = &s->buffer[buf];
    am_run_image *im = &rr->img[rr->n_img++];
    memset(im, 0, sizeof *im);
    im->buf = buf;
    im->base_mip = b->base_mip;
    im->read_back = b->kind == AM_BIND_STORAGE_IMAGE;
    im->usage = image_usage(s, buf);
    char name[AM_FORMAT_MAX + 8];
    VkImageCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
                            .imageType = image_type(ab),
                            .format = buffer_format(ab, name, sizeof name),
                            .extent = {or1(ab->width), or1(ab->height), or1(ab->depth)},
                            .mipLevels = or1(ab->mip_levels),
                            .arrayLayers = 1,
                            .samples = VK_SAMPLE_COUNT_1_BIT,
                            .tiling = VK_IMAGE_TILING_OPTIMAL,
                            .usage = im->usage,
                            .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
                            .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED};
    VkResult r = VF_VK_CALL(&x->dev, x->img, vkCreateImage, DEV, &ci, NULL, &im->image);
    if (r != VK_SUCCESS) return am_fail_at(res, pos, "vkCreateImage for '%s' failed: %s", ab->name, vf_vk_result_name(r));
    VkMemoryRequirements mr;
    IMG->vkGetImageMemoryRequirements(DEV, im->image, &mr);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = mr.size,
                               .memoryTypeIndex = memory_type(x, mr.memoryTypeBits)};
    if (ai.memoryTypeIndex == UINT32_MAX) return am_fail_at(res, pos, "no memory type for image '%s'", ab->name);
    r = VF_VKD(&x->dev, vkAllocateMemory, DEV, &ai, NULL, &im->memory);
    if (r != VK_SUCCESS) return am_fail_at(res, pos, "image '%s': vkAllocateMemory failed: %s", ab->name, vf_vk_result_name(r));
    r = VF_VK_CALL(&x->dev, x->img, vkBindImageMemory, DEV, im->image, im->memory, 0);
    if (r != VK_SUCCESS) return am_fail_at(res, pos, "vkBindImageMemory failed: %s", vf_vk_result_name(r));
    VkImageViewCreateInfo vi = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO,
        .image = im->image,
        .viewType = ab->dim == 1 ? VK_IMAGE_VIEW_TYPE_1D : ab->dim == 3 ? VK_IMAGE_VIEW_TYPE_3D : VK_IMAGE_VIEW_TYPE_2D,
        .format = ci.format,
        .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, im->base_mip, VK_REMAINING_MIP_LEVELS, 0, 1}};
    r = VF_VK_CALL(&x->dev, x->img, vkCreateImageView, DEV, &vi, NULL, &im->view);
    if (r != VK_SUCCESS) return am_fail_at(res, pos, "vkCreateImageView failed: %s", vf_vk_result_name(r));
    *out = im;
    return AM_PASS;
}

am_status am_img_prepare(am_exec *x, const am_script *s, const am_pipeline *pl, const int *order, am_pos pos,
                         am_result *res)
{
    for (int j = 0; j < pl->n_bind; j++) {
        const am_binding *b = &pl->bind[order[j]];
        for (int k = 0; k < b->n; k++) {
            if (b->kind == AM_BIND_SAMPLER) {
                x->run.ii[j][k] = (VkDescriptorImageInfo){.sampler = x->sampler[b->buf[k]]};
            } else if (is_texel(b->kind)) {
                char name[AM_FORMAT_MAX + 8];
                VkBufferViewCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                                             .buffer = x->buf[b->buf[k]].buffer,
                                             .format = buffer_format(&s->buffer[b->buf[k]], name, sizeof name),
                                             .range = VK_WHOLE_SIZE};
                VkResult r = VF_VK_CALL(&x->dev, x->img, vkCreateBufferView, DEV, &ci, NULL, &x->run.view[j][k]);
                if (r != VK_SUCCESS) return am_fail_at(res, pos, "vkCreateBufferView failed: %s", vf_vk_result_name(r));
            } else if (am_bind_is_image(b->kind)) {
                am_run_image *im = NULL;
                am_status st = get_image(x, s, b->buf[k], b, pos, &im, res);
                if (st != AM_PASS) return st;
                x->run.ii[j][k] = (VkDescriptorImageInfo){
                    .sampler = b->kind == AM_BIND_COMBINED_IMAGE_SAMPLER ? x->sampler[b->sampler] : VK_NULL_HANDLE,
                    .imageView = im->view,
                    .imageLayout = VK_IMAGE_LAYOUT_GENERAL}; /* Amber's one layout */
            }
        }
    }
    return AM_PASS;
}

static void barrier(am_exec *x, VkImage image, VkImageLayout from, VkImageLayout to, VkAccessFlags src_a,
                    VkAccessFlags dst_a, VkPipelineStageFlags src_s, VkPipelineStageFlags dst_s)
{
    VkImageMemoryBarrier b = {.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
                              .srcAccessMask = src_a,
                              .dstAccessMask = dst_a,
                              .oldLayout = from,
                              .newLayout = to,
                              .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                              .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                              .image = image,
                              .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, VK_REMAINING_MIP_LEVELS, 0, 1}};
    VK->vkCmdPipelineBarrier(x->cb, src_s, dst_s, 0, 0, NULL, 0, NULL, 1, &b);
}

/* Amber's copy region for one level: from / to the start of the buffer,
   rows tightly packed. A level's extent is Amber's (width and height
   shifted, depth whole) kept at least 1, as Vulkan requires. */
static VkBufferImageCopy region(const am_buffer *ab, uint32_t level)
{
    uint32_t d = or1(ab->depth);
    if (ab->dim == 3) d = or1(d >> level);
    return (VkBufferImageCopy){.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, level, 0, 1},
                               .imageExtent = {or1(or1(ab->width) >> level), or1(or1(ab->height) >> level), d}};
}

void am_img_record_upload(am_exec *x, const am_script *s)
{
    for (int i = 0; i < x->run.n_img; i++) {
        am_run_image *im = &x->run.img[i];
        const am_buffer *ab = &s->buffer[im->buf];
        barrier(x, im->image, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 0,
                VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT);
        VkBufferImageCopy regions[32];
        uint32_t n = 0;
        for (uint32_t l = im->base_mip; l < or1(ab->mip_levels) && n < 32; l++) regions[n++] = region(ab, l);
        IMG->vkCmdCopyBufferToImage(x->cb, x->buf[im->buf].buffer, im->image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, n,
                                    regions);
        barrier(x, im->image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, VK_IMAGE_LAYOUT_GENERAL, VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
    }
}

void am_img_record_readback(am_exec *x, const am_script *s)
{
    bool any = false;
    for (int i = 0; i < x->run.n_img; i++) {
        am_run_image *im = &x->run.img[i];
        if (!im->read_back) continue;
        const am_buffer *ab = &s->buffer[im->buf];
        barrier(x, im->image, VK_IMAGE_LAYOUT_GENERAL, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, VK_ACCESS_SHADER_WRITE_BIT,
                VK_ACCESS_TRANSFER_READ_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT);
        for (uint32_t l = im->base_mip; l < or1(ab->mip_levels); l++) {
            if (l > im->base_mip) {
                /* Each level overwrites the start of the buffer, in order. */
                VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                      .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                                      .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT};
                VK->vkCmdPipelineBarrier(x->cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                                         NULL, 0, NULL);
            }
            VkBufferImageCopy rg = region(ab, l);
            IMG->vkCmdCopyImageToBuffer(x->cb, im->image, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, x->buf[im->buf].buffer, 1,
                                        &rg);
        }
        any = true;
    }
    if (any) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT};
        VK->vkCmdPipelineBarrier(x->cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                                 NULL);
    }
}

void am_img_finish(am_exec *x, const am_script *s)
{
    am_run_res *rr = &x->run;
    for (int i = 0; i < rr->n_img; i++) {
        am_run_image *im = &rr->img[i];
        if (im->read_back && s) {
            /* Amber's buffer now holds the image's texels, no more. */
            const am_buffer *ab = &s->buffer[im->buf];
            uint64_t bytes = (uint64_t)or1(ab->width) * or1(ab->height) * or1(ab->depth) * ab->fmt.stride;
            if (bytes < x->buf[im->buf].size) x->buf[im->buf].size = bytes;
        }
        if (im->view) IMG->vkDestroyImageView(DEV, im->view, NULL);
        if (im->image) IMG->vkDestroyImage(DEV, im->image, NULL);
        if (im->memory) VK->vkFreeMemory(DEV, im->memory, NULL);
    }
    rr->n_img = 0;
    for (int j = 0; j < AM_MAX_BINDINGS; j++)
        for (int k = 0; k < AM_MAX_ARRAY; k++)
            if (rr->view[j][k]) {
                IMG->vkDestroyBufferView(DEV, rr->view[j][k], NULL);
                rr->view[j][k] = VK_NULL_HANDLE;
            }
}

void am_img_destroy(am_exec *x)
{
    if (!x->img_loaded) return;
    for (int i = 0; i < AM_MAX_SAMPLERS; i++)
        if (x->sampler[i]) IMG->vkDestroySampler(DEV, x->sampler[i], NULL);
}
