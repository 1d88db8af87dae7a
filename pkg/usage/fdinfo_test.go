package usage_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

// Each driver's fdinfo in the shape its kernel code prints it (the
// driver pages under Documentation/gpu/ and the drivers' show_fdinfo).
var driverFDInfo = map[string]string{
	"i915": "pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t685\ndrm-driver:\ti915\ndrm-client-id:\t7\ndrm-pdev:\t0000:00:02.0\n" +
		"drm-total-system0:\t4 MiB\ndrm-shared-system0:\t0\ndrm-active-system0:\t0\ndrm-resident-system0:\t4 MiB\ndrm-purgeable-system0:\t0\n" +
		"drm-engine-render:\t25662044495 ns\ndrm-engine-copy:\t0 ns\ndrm-engine-video:\t2000000000 ns\ndrm-engine-capacity-video:\t2\ndrm-engine-video-enhance:\t0 ns\n",
	"xe": "drm-driver:\txe\ndrm-client-id:\t43\ndrm-pdev:\t0000:03:00.0\ndrm-total-vram0:\t245 MiB\ndrm-shared-vram0:\t0\ndrm-active-vram0:\t0\ndrm-resident-vram0:\t245 MiB\n" +
		"drm-cycles-rcs:\t28257900\ndrm-total-cycles-rcs:\t7655183225\ndrm-cycles-vcs:\t100\ndrm-total-cycles-vcs:\t7655183225\ndrm-engine-capacity-vcs:\t2\n",
	"amdgpu": "pasid:\t32771\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t1234\ndrm-memory-vram:\t10240 KiB\ndrm-memory-gtt: \t2048 KiB\ndrm-memory-cpu: \t0 KiB\n" +
		"amd-memory-visible-vram:\t10240 KiB\ndrm-engine-gfx:\t1000 ns\ndrm-engine-dec:\t5000000000 ns\ndrm-engine-enc:\t1000000000 ns\n",
	"msm": "drm-driver:\tmsm\ndrm-client-id:\t3\ndrm-engine-gpu:\t1000000000 ns\ndrm-cycles-gpu:\t600000000\ndrm-maxfreq-gpu:\t600 MHz\ndrm-total-memory:\t12 MiB\n",
	"panfrost": "drm-driver:\tpanfrost\ndrm-client-id:\t14\ndrm-engine-fragment:\t1846584880 ns\ndrm-cycles-fragment:\t1424359409\ndrm-maxfreq-fragment:\t799999987 Hz\n" +
		"drm-curfreq-fragment:\t799999987 Hz\ndrm-engine-vertex-tiler:\t71932239 ns\ndrm-cycles-vertex-tiler:\t52617357\ndrm-maxfreq-vertex-tiler:\t799999987 Hz\n" +
		"drm-total-memory:\t290 MiB\ndrm-shared-memory:\t0 MiB\ndrm-active-memory:\t226 MiB\ndrm-resident-memory:\t36496 KiB\ndrm-purgeable-memory:\t128 KiB\n",
	"panthor": "drm-driver:\tpanthor\ndrm-client-id:\t10\ndrm-engine-panthor:\t111110952750 ns\ndrm-cycles-panthor:\t94439687187\ndrm-maxfreq-panthor:\t1000000000 Hz\n" +
		"drm-curfreq-panthor:\t1000000000 Hz\npanthor-resident-memory:\t10396 KiB\ndrm-total-memory:\t16480 KiB\ndrm-shared-memory:\t0\n",
	"v3d":     "drm-driver:\tv3d\ndrm-client-id:\t5\ndrm-engine-bin:\t100 ns\nv3d-jobs-bin:\t2 jobs\ndrm-engine-render:\t200 ns\ndrm-engine-tfu:\t300 ns\ndrm-engine-csd:\t400 ns\ndrm-engine-cache_clean:\t500 ns\n",
	"lima":    "drm-driver:\tlima\ndrm-client-id:\t2\ndrm-engine-gp:\t1000 ns\ndrm-engine-pp:\t3000 ns\n",
	"etnaviv": "drm-driver:\tetnaviv\ndrm-client-id:\t9\ndrm-engine-2D/3D:\t1000 ns\ndrm-engine-2D:\t7 ns\n",
}

// wantClasses is each driver's busy nanoseconds per class (capacity
// divided), the figure the metrics report.
var wantClasses = map[string]map[string]float64{
	"i915":     {usage.ClassRender: 25662044495, usage.ClassCopy: 0, usage.ClassVideo: 1e9, usage.ClassVideoEnhance: 0},
	"amdgpu":   {usage.ClassRender: 1000, usage.ClassVideo: 6e9},
	"msm":      {usage.ClassRender: 1e9},
	"panfrost": {usage.ClassRender: 1846584880 + 71932239},
	"panthor":  {usage.ClassRender: 111110952750},
	"v3d":      {usage.ClassRender: 300, usage.ClassCopy: 300, usage.ClassCompute: 400, usage.ClassOther: 500},
	"lima":     {usage.ClassRender: 4000},
	"etnaviv":  {usage.ClassRender: 1000, usage.ClassCopy: 7},
}

func TestParseFDInfoDrivers(t *testing.T) {
	for driver, text := range driverFDInfo {
		t.Run(driver, func(t *testing.T) {
			info, err := usage.ParseFDInfo([]byte(text))
			require.NoError(t, err)
			require.Equal(t, driver, info.Driver)
			require.True(t, info.HasClientID)
			require.Zero(t, info.Malformed)
			got := map[string]float64{}
			for name, e := range info.Engines {
				if e.HasBusyNS {
					got[usage.ClassOf(driver, name)] += float64(e.BusyNS) / float64(e.Capacity)
				}
			}
			if want, ok := wantClasses[driver]; ok {
				require.Equal(t, want, got)
			} else {
				require.Empty(t, got, "xe gives cycles only")
			}
		})
	}
}

func TestParseFDInfoFields(t *testing.T) {
	tests := map[string]struct {
		text      string
		check     func(t *testing.T, f *usage.FDInfo)
		malformed int
	}{
		"units": {
			text: "drm-driver: x\ndrm-total-vram: 3 MiB\ndrm-resident-vram: 2 KiB\ndrm-shared-vram: 5\ndrm-maxfreq-a: 2 KHz\ndrm-maxfreq-b: 3 MHz\ndrm-maxfreq-c: 4 Hz\n",
			check: func(t *testing.T, f *usage.FDInfo) {
				require.Equal(t, map[string]uint64{"total": 3 << 20, "resident": 2 << 10, "shared": 5}, f.Memory["vram"])
				require.Equal(t, uint64(2000), f.Engines["a"].MaxFreqHz)
				require.Equal(t, uint64(3e6), f.Engines["b"].MaxFreqHz)
				require.Equal(t, uint64(4), f.Engines["c"].MaxFreqHz)
			},
		},
		"deprecated drm-memory is resident": {
			text: "drm-driver: amdgpu\ndrm-memory-vram: 7 KiB\n",
			check: func(t *testing.T, f *usage.FDInfo) {
				require.Equal(t, map[string]uint64{"resident": 7 << 10}, f.Memory["vram"])
			},
		},
		"total-cycles is not total memory": {
			text: "drm-driver: xe\ndrm-total-cycles-rcs: 9\ndrm-cycles-rcs: 4\n",
			check: func(t *testing.T, f *usage.FDInfo) {
				require.Empty(t, f.Memory)
				e := f.Engines["rcs"]
				require.True(t, e.HasTotalCycles && e.HasCycles)
				require.Equal(t, uint64(9), e.TotalCycles)
				require.Equal(t, uint64(4), e.Cycles)
				require.False(t, e.HasBusyNS)
			},
		},
		"capacity is not an engine": {
			text: "drm-driver: i915\ndrm-engine-capacity-video: 2\ndrm-engine-video: 10 ns\n",
			check: func(t *testing.T, f *usage.FDInfo) {
				require.Len(t, f.Engines, 1)
				require.Equal(t, uint64(2), f.Engines["video"].Capacity)
			},
		},
		"client name keeps spaces": {
			text: "drm-driver: i915\ndrm-client-name: my app\n",
			check: func(t *testing.T, f *usage.FDInfo) {
				require.Equal(t, "my app", f.ClientName)
				require.False(t, f.HasClientID)
			},
		},
		"unknown keys ignored": {
			text: "drm-driver: i915\ndrm-curfreq-x: 5 Hz\ndrm-something-new: whatever\nxe-private: 1\npos: 0\n",
			check: func(t *testing.T, f *usage.FDInfo) {
				require.Empty(t, f.Engines)
			},
		},
		"malformed lines skipped and counted": {
			text: "drm-driver: i915\ndrm-engine-render: 12 ms\ndrm-engine-copy: x ns\ndrm-engine-capacity-video: 0\ndrm-total-vram: 1 GiB\n" +
				"drm-client-id: -1\ndrm-cycles-rcs: 1.5\ndrm-total-vram0: 18446744073709551615 MiB\nno colon drm-\ndrm-no-colon\ndrm-engine-video: 5 ns\n",
			malformed: 8,
			check: func(t *testing.T, f *usage.FDInfo) {
				require.Len(t, f.Engines, 1)
				require.Equal(t, uint64(5), f.Engines["video"].BusyNS)
				require.Empty(t, f.Memory)
			},
		},
		"truncated last line": {
			text: "drm-driver: i915\ndrm-client-id: 4\ndrm-engine-render: 100",
			check: func(t *testing.T, f *usage.FDInfo) {
				require.Equal(t, uint64(100), f.Engines["render"].BusyNS)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := usage.ParseFDInfo([]byte(tc.text))
			require.NoError(t, err)
			require.Equal(t, tc.malformed, f.Malformed)
			tc.check(t, f)
		})
	}
}

func TestParseFDInfoNotDRM(t *testing.T) {
	for name, text := range map[string]string{
		"empty":       "",
		"plain file":  "pos:\t0\nflags:\t0100002\nmnt_id:\t26\n",
		"no driver":   "drm-client-id: 3\ndrm-engine-render: 5 ns\n",
		"empty value": "drm-driver:\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := usage.ParseFDInfo([]byte(text))
			require.ErrorIs(t, err, usage.ErrNotDRM)
		})
	}
}

func TestClassOf(t *testing.T) {
	tests := []struct{ driver, engine, class string }{
		{"i915", "render", usage.ClassRender},
		{"i915", "video", usage.ClassVideo},
		{"i915", "video-enhance", usage.ClassVideoEnhance},
		{"i915", "copy", usage.ClassCopy},
		{"i915", "compute", usage.ClassCompute},
		{"xe", "rcs", usage.ClassRender},
		{"xe", "bcs", usage.ClassCopy},
		{"xe", "vcs", usage.ClassVideo},
		{"xe", "vecs", usage.ClassVideoEnhance},
		{"xe", "ccs", usage.ClassCompute},
		{"amdgpu", "gfx", usage.ClassRender},
		{"amdgpu", "compute", usage.ClassCompute},
		{"amdgpu", "dma", usage.ClassCopy},
		{"amdgpu", "dec", usage.ClassVideo},
		{"amdgpu", "enc", usage.ClassVideo},
		{"amdgpu", "enc_1", usage.ClassVideo},
		{"amdgpu", "jpeg", usage.ClassVideo},
		{"amdgpu", "vpe", usage.ClassVideoEnhance},
		{"msm", "gpu", usage.ClassRender},
		{"panfrost", "fragment", usage.ClassRender},
		{"panfrost", "vertex-tiler", usage.ClassRender},
		{"panfrost", "compute-only", usage.ClassCompute},
		{"panthor", "panthor", usage.ClassRender},
		{"v3d", "bin", usage.ClassRender},
		{"v3d", "render", usage.ClassRender},
		{"v3d", "tfu", usage.ClassCopy},
		{"v3d", "csd", usage.ClassCompute},
		{"v3d", "cache_clean", usage.ClassOther},
		{"lima", "gp", usage.ClassRender},
		{"lima", "pp", usage.ClassRender},
		{"etnaviv", "3D", usage.ClassRender},
		{"etnaviv", "2D/3D", usage.ClassRender},
		{"etnaviv", "2D", usage.ClassCopy},
		{"amdxdna_accel_driver", "npu-amdxdna", usage.ClassCompute},
		{"newdrv", "compute", usage.ClassCompute},
		{"newdrv", "video", usage.ClassVideo},
		{"newdrv", "npu", usage.ClassOther},
		{"xe", "gsc", usage.ClassOther},
	}
	for _, tc := range tests {
		t.Run(tc.driver+"/"+tc.engine, func(t *testing.T) {
			require.Equal(t, tc.class, usage.ClassOf(tc.driver, tc.engine))
		})
	}
}
