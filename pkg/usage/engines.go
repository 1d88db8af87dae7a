package usage

// Engine classes: the few kinds of engine users recognize, whatever the
// driver calls them. Metrics and dri-cdi top report classes; the table in
// docs/usage.md lists every driver's names.
const (
	ClassRender       = "render"
	ClassVideo        = "video"
	ClassVideoEnhance = "video-enhance"
	ClassCopy         = "copy"
	ClassCompute      = "compute"
	ClassOther        = "other"
)

// Classes lists the classes in the order they are shown.
var Classes = []string{ClassRender, ClassVideo, ClassVideoEnhance, ClassCopy, ClassCompute, ClassOther}

// engineClasses maps each driver's engine names (drm-engine-<name>,
// drm-cycles-<name>) to a class. Sources: the kernel's driver pages under
// Documentation/gpu/ and each driver's show_fdinfo.
var engineClasses = map[string]map[string]string{
	// i915: uabi class names (i915_drm_client.c).
	"i915": {"render": ClassRender, "copy": ClassCopy, "video": ClassVideo, "video-enhance": ClassVideoEnhance, "compute": ClassCompute},
	// xe: engine class names (xe_drm_client.c), cycles only.
	"xe": {"rcs": ClassRender, "bcs": ClassCopy, "vcs": ClassVideo, "vecs": ClassVideoEnhance, "ccs": ClassCompute},
	// amdgpu: amdgpu_ip_name (amdgpu_fdinfo.c); UVD/VCN decode and
	// VCE/VCN encode and JPEG are all video.
	"amdgpu": {"gfx": ClassRender, "compute": ClassCompute, "dma": ClassCopy, "dec": ClassVideo, "enc": ClassVideo, "enc_1": ClassVideo, "jpeg": ClassVideo, "vpe": ClassVideoEnhance},
	// msm: one engine for the whole Adreno GPU.
	"msm": {"gpu": ClassRender},
	// panfrost: job slots (panfrost_drv.c).
	"panfrost": {"fragment": ClassRender, "vertex-tiler": ClassRender, "compute-only": ClassCompute},
	// panthor: one engine for the CSF firmware's queues.
	"panthor": {"panthor": ClassRender},
	// v3d: binner, renderer, texture formatting unit, compute shader
	// dispatch, cache clean.
	"v3d": {"bin": ClassRender, "render": ClassRender, "tfu": ClassCopy, "csd": ClassCompute, "cache_clean": ClassOther},
	// lima: geometry and pixel processors (scheduler names).
	"lima": {"gp": ClassRender, "pp": ClassRender},
	// etnaviv: per pipe, named after its features; a 2D-only core is a
	// blitter.
	"etnaviv": {"3D": ClassRender, "2D/3D": ClassRender, "2D": ClassCopy},
	// amdxdna (accel): one NPU engine (amdxdna_show_fdinfo).
	"amdxdna_accel_driver": {"npu-amdxdna": ClassCompute},
}

// genericClasses names engines of drivers the table does not know, and
// of known drivers that add an engine, when the name says what it is.
var genericClasses = map[string]string{
	"render": ClassRender, "gfx": ClassRender, "3d": ClassRender,
	"video": ClassVideo, "video-enhance": ClassVideoEnhance,
	"copy": ClassCopy, "compute": ClassCompute,
}

// ClassOf returns the class of driver's engine name: the driver's table
// first, then the generic names, else ClassOther.
func ClassOf(driver, engine string) string {
	if c, ok := engineClasses[driver][engine]; ok {
		return c
	}
	if c, ok := genericClasses[engine]; ok {
		return c
	}
	return ClassOther
}
