package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func TestParse(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    *Config
		wantErr []string // substrings, all must appear
	}{
		"empty":                       {in: "", want: Default()},
		"whitespace and comment only": {in: "  \n# nothing\n", want: Default()},
		"full": {
			in: `
cdiKind: example.com/gpu
defaultPools: false
pools:
- resource: gpu.intel.com/i915
  drivers: [i915]
  pciIDs: ["8086:56a0", "8086:*"]
  includeDisplayOnly: true
  replicas: 4
  allowSameCardReplicas: true
  shares: 3
  requireMemoryLimit: true
`,
			want: &Config{CDIKind: "example.com/gpu", Pools: []PoolConfig{{
				Resource: "gpu.intel.com/i915", Drivers: []string{"i915"}, PCIIDs: []string{"8086:56a0", "8086:*"},
				IncludeDisplayOnly: true, Replicas: 4, AllowSameCardReplicas: true, Shares: ptr(3), RequireMemoryLimit: true,
			}}},
		},
		"replicas defaults to 1 and defaultPools to true": {
			in:   "pools:\n- resource: example.com/gpu\n  drivers: [xe]\n",
			want: &Config{DefaultPools: true, Pools: []PoolConfig{{Resource: "example.com/gpu", Drivers: []string{"xe"}, Replicas: 1}}},
		},
		"null values keep defaults": {
			in:   "cdiKind: null\npools:\n- resource: example.com/gpu\n  pciIDs: [1002:*]\n  replicas: null\n  shares: null\n",
			want: &Config{DefaultPools: true, Pools: []PoolConfig{{Resource: "example.com/gpu", PCIIDs: []string{"1002:*"}, Replicas: 1}}},
		},
		"companions": {
			in: "pools:\n- resource: dri-cdi.dev/v3d\n  drivers: [v3d]\n  companions:\n  - subsystem: video4linux\n  - path: /dev/dma_heap/*\n",
			want: &Config{DefaultPools: true, Pools: []PoolConfig{{Resource: "dri-cdi.dev/v3d", Drivers: []string{"v3d"}, Replicas: 1,
				Companions: []drm.Companion{{Subsystem: "video4linux"}, {Path: "/dev/dma_heap/*"}}}}},
		},
		"companion with both forms":         {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{subsystem: media, path: /dev/media0}]\n", wantErr: []string{"pools[0].companions[0]: set exactly one of subsystem and path"}},
		"companion with neither form":       {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{}]\n", wantErr: []string{"pools[0].companions[0]: set exactly one of subsystem and path"}},
		"companion unknown field":           {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{glob: /dev/x}]\n", wantErr: []string{"pools[0].companions[0].glob: unknown field (known: subsystem, path)"}},
		"companion not a mapping":           {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [/dev/video10]\n", wantErr: []string{"pools[0].companions[0]: want a mapping, got a string"}},
		"companion subsystem not listed":    {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{subsystem: scsi_generic}]\n", wantErr: []string{`pools[0].companions[0]: subsystem "scsi_generic" is not one of video4linux, media, dma_heap, kfd, misc`}},
		"companion subsystem drm":           {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{subsystem: drm}]\n", wantErr: []string{`pools[0].companions[0]: subsystem "drm": another card's node is never a companion`}},
		"companion path outside /dev":       {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{path: /sys/x}]\n", wantErr: []string{`pools[0].companions[0]: path "/sys/x" is not a clean absolute path under /dev`}},
		"companion path not clean":          {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{path: /dev/../etc/shadow}]\n", wantErr: []string{`is not a clean absolute path under /dev`}},
		"companion path in /dev/dri":        {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{path: /dev/dri/renderD129}]\n", wantErr: []string{`pools[0].companions[0]: path "/dev/dri/renderD129": /dev/dri holds cards' own nodes, never companions`}},
		"companion glob over /dev/accel":    {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{path: /dev/*}]\n", wantErr: []string{`/dev/dri holds cards' own nodes`}},
		"companion path in /dev/accel":      {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{path: /dev/accel/accel1}]\n", wantErr: []string{`/dev/accel holds cards' own nodes`}},
		"companion bad glob":                {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  companions: [{path: \"/dev/video[\"}]\n", wantErr: []string{`path "/dev/video[": syntax error in pattern`}},
		"unknown top-level field":           {in: "defaultPool: true\n", wantErr: []string{"defaultPool: unknown field (known: cdiKind, defaultPools, pools)"}},
		"unknown pool field":                {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n- resource: a.b/d\n  drivers: [z]\n  replica: 2\n", wantErr: []string{"pools[1].replica: unknown field (known: resource, drivers, pciIDs, includeDisplayOnly, replicas, allowSameCardReplicas, shares, requireMemoryLimit, companions)"}},
		"field names are exact":             {in: "pools:\n- Resource: a.b/c\n  drivers: [x]\n", wantErr: []string{"pools[0].Resource: unknown field"}},
		"duplicate key":                     {in: "cdiKind: a.b/c\ncdiKind: d.e/f\n", wantErr: []string{`"cdiKind" already set`}},
		"replicas zero":                     {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n- resource: a.b/d\n  drivers: [z]\n  replicas: 0\n", wantErr: []string{"pools[1].replicas: must be >= 1"}},
		"replicas too many":                 {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  replicas: 1001\n", wantErr: []string{"pools[0].replicas: must be <= 1000"}},
		"shares zero":                       {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  shares: 0\n", wantErr: []string{"pools[0].shares: must be between 1 and 1000 (leave it out for exclusive DRA claims)"}},
		"shares too many":                   {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  shares: 1001\n", wantErr: []string{"pools[0].shares: must be between 1 and 1000"}},
		"requireMemoryLimit without shares": {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  requireMemoryLimit: true\n", wantErr: []string{"pools[0].requireMemoryLimit: needs shares: device memory is allocated to shares of a card only"}},
		"shares not a number":               {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  shares: all\n", wantErr: []string{"pools[0].shares: want an integer, got a string"}},
		"replicas not a number":             {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  replicas: two\n", wantErr: []string{"pools[0].replicas: want an integer, got a string"}},
		"replicas fractional":               {in: "pools:\n- resource: a.b/c\n  drivers: [x]\n  replicas: 1.5\n", wantErr: []string{"pools[0].replicas: want an integer, got the number 1.5"}},
		"defaultPools not bool":             {in: "defaultPools: yes please\n", wantErr: []string{"defaultPools: want true or false, got a string"}},
		"pools not a list":                  {in: "pools: {resource: a.b/c}\n", wantErr: []string{"pools: want a list, got a mapping"}},
		"pool not a mapping":                {in: "pools: [a.b/c]\n", wantErr: []string{"pools[0]: want a mapping, got a string"}},
		"pool null":                         {in: "pools: [null]\n", wantErr: []string{"pools[0]: want a mapping, got null"}},
		"top level list":                    {in: "- a\n- b\n", wantErr: []string{"(top level): want a mapping, got a list"}},
		"top level scalar":                  {in: "hello\n", wantErr: []string{"(top level): want a mapping, got a string"}},
		"malformed yaml":                    {in: "pools: [\n", wantErr: []string{"invalid config"}},
		"resource missing":                  {in: "pools:\n- drivers: [x]\n", wantErr: []string{"pools[0].resource: required"}},
		"resource without domain":           {in: "pools:\n- resource: gpu\n  drivers: [x]\n", wantErr: []string{`pools[0].resource: "gpu" is not an extended resource name`}},
		"resource in kubernetes.io":         {in: "pools:\n- resource: kubernetes.io/gpu\n  drivers: [x]\n", wantErr: []string{"pools[0].resource", "reserved"}},
		"resource subdomain of kubernetes.io": {
			in: "pools:\n- resource: foo.kubernetes.io/gpu\n  drivers: [x]\n", wantErr: []string{"pools[0].resource", "reserved"},
		},
		"resource uppercase domain": {in: "pools:\n- resource: Example.com/gpu\n  drivers: [x]\n", wantErr: []string{"pools[0].resource", "DNS-1123"}},
		"resource two slashes":      {in: "pools:\n- resource: a.b/c/d\n  drivers: [x]\n", wantErr: []string{"pools[0].resource", "not an extended resource name"}},
		"resource name too long":    {in: "pools:\n- resource: a.b/" + strings.Repeat("x", 64) + "\n  drivers: [x]\n", wantErr: []string{"pools[0].resource", "longer than 63"}},
		"resource name bad end":     {in: "pools:\n- resource: a.b/gpu-\n  drivers: [x]\n", wantErr: []string{"pools[0].resource", "start and end"}},
		"duplicate resource": {
			in:      "pools:\n- resource: a.b/c\n  drivers: [x]\n- resource: a.b/c\n  drivers: [z]\n",
			wantErr: []string{`pools[1].resource: "a.b/c" is already used by pools[0]`},
		},
		"no criteria":             {in: "pools:\n- resource: a.b/c\n", wantErr: []string{"pools[0]: set drivers, pciIDs or both"}},
		"bad pci id":              {in: "pools:\n- resource: a.b/c\n  pciIDs: [\"8086:56a0\", \"8086\"]\n", wantErr: []string{`pools[0].pciIDs[1]: "8086" is not a PCI vendor:device`}},
		"pci id vendor *":         {in: "pools:\n- resource: a.b/c\n  pciIDs: [\"*:56a0\"]\n", wantErr: []string{"pools[0].pciIDs[0]"}},
		"pci id 0x prefix":        {in: "pools:\n- resource: a.b/c\n  pciIDs: [\"0x8086:56a0\"]\n", wantErr: []string{"pools[0].pciIDs[0]"}},
		"pci id not hex":          {in: "pools:\n- resource: a.b/c\n  pciIDs: [\"80g6:56a0\"]\n", wantErr: []string{"pools[0].pciIDs[0]"}},
		"empty driver":            {in: "pools:\n- resource: a.b/c\n  drivers: [\"\"]\n", wantErr: []string{"pools[0].drivers[0]: empty driver name"}},
		"driver with slash":       {in: "pools:\n- resource: a.b/c\n  drivers: [\"a/b\"]\n", wantErr: []string{"pools[0].drivers[0]", "invalid character"}},
		"driver too long":         {in: "pools:\n- resource: a.b/c\n  drivers: [" + strings.Repeat("d", 64) + "]\n", wantErr: []string{"pools[0].drivers[0]", "is longer than 63 bytes"}},
		"yaml 1.1 boolean driver": {in: "pools:\n- resource: a.b/c\n  drivers: [i915, y]\n", wantErr: []string{"pools[0].drivers[1]: want a string (quote it), got a boolean"}},
		"null driver":             {in: "pools:\n- resource: a.b/c\n  drivers: [null]\n", wantErr: []string{"pools[0].drivers[0]: want a string (quote it), got null"}},
		"drivers not a list":      {in: "pools:\n- resource: a.b/c\n  drivers: i915\n", wantErr: []string{"pools[0].drivers: want a list of strings, got a string"}},
		"bad cdi kind":            {in: "cdiKind: gpu\n", wantErr: []string{`cdiKind: "gpu" is not a CDI kind`}},
		"bad cdi kind vendor":     {in: "cdiKind: 1x/gpu\n", wantErr: []string{"cdiKind", "vendor"}},
		"all errors reported": {
			in:      "pools:\n- resource: gpu\n  drivers: [x]\n  replicas: 0\n",
			wantErr: []string{"pools[0].resource", "pools[0].replicas: must be >= 1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if tc.wantErr != nil {
				require.Error(t, err)
				require.ErrorIs(t, err, ErrInvalid)
				for _, s := range tc.wantErr {
					require.Contains(t, err.Error(), s)
				}
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("cdiKind: example.com/gpu\n"), 0o600))
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("pools:\n- resource: a.b/c\n  drivers: [x]\n  replicas: -1\n"), 0o600))

	tests := map[string]struct {
		path     string
		wantKind string
		wantErr  []string
	}{
		"no path gives defaults": {path: "", wantKind: cdi.DefaultKind},
		"good file":              {path: good, wantKind: "example.com/gpu"},
		"bad file names path and field": {
			path: bad, wantErr: []string{bad, "pools[0].replicas: must be >= 1"},
		},
		"missing file": {path: filepath.Join(dir, "nope.yaml"), wantErr: []string{"nope.yaml", "no such file"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Load(tc.path)
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					require.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantKind, c.Kind())
		})
	}
}

func TestKindAndServesResource(t *testing.T) {
	cfg, err := Parse([]byte("cdiKind: example.com/gpu\npools:\n- resource: gpu.intel.com/i915\n  drivers: [i915]\n"))
	require.NoError(t, err)
	noDefaults, err := Parse([]byte("defaultPools: false\npools:\n- resource: gpu.intel.com/i915\n  drivers: [i915]\n"))
	require.NoError(t, err)

	tests := map[string]struct {
		cfg      *Config
		resource string
		want     bool
	}{
		"configured pool":                 {cfg: cfg, resource: "gpu.intel.com/i915", want: true},
		"default pool name":               {cfg: cfg, resource: "dri-cdi.dev/xe", want: true},
		"default pool name, defaults off": {cfg: noDefaults, resource: "dri-cdi.dev/xe", want: false},
		"configured pool, defaults off":   {cfg: noDefaults, resource: "gpu.intel.com/i915", want: true},
		"foreign resource":                {cfg: cfg, resource: "nvidia.com/gpu", want: false},
		"invalid default-looking name":    {cfg: cfg, resource: "dri-cdi.dev/a/b", want: false},
		"bare prefix":                     {cfg: cfg, resource: "dri-cdi.dev/", want: false},
		"nil config means defaults":       {cfg: nil, resource: "dri-cdi.dev/i915", want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.cfg.ServesResource(tc.resource))
		})
	}
	require.Equal(t, "example.com/gpu", cfg.Kind())
	require.Equal(t, cdi.DefaultKind, Default().Kind())
	require.Equal(t, cdi.DefaultKind, (*Config)(nil).Kind())
}

func TestValidResourceName(t *testing.T) {
	// name -> what the error must say; "" for a valid name.
	tests := map[string]string{
		"dri-cdi.dev/i915":              "",
		"gpu.intel.com/i915":            "",
		"dri-cdi.dev/virtio_gpu":        "",
		"example.com/A.b-c_d":           "",
		"example.com/":                  "is not an extended resource name <domain>/<name>",
		"/gpu":                          "is not an extended resource name <domain>/<name>",
		"example..com/gpu":              `domain "example..com" is not a lowercase DNS-1123 subdomain`,
		"-example.com/gpu":              `domain "-example.com" is not a lowercase DNS-1123 subdomain`,
		"example.com/_gpu":              "name part must start and end with a letter or digit",
		"example.com/g pu":              "name part has invalid character ' '",
		"requests.kubernetes.io/x":      "the kubernetes.io domain is reserved",
		strings.Repeat("a", 245) + "/x": "domain is longer than 244 bytes",
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "/x": "",
		"example.com/" + strings.Repeat("g", 64):                       "name part is longer than 63 bytes",
	}
	for name, wantErr := range tests {
		t.Run(name, func(t *testing.T) {
			err := ValidResourceName(name)
			if wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, wantErr)
				require.ErrorContains(t, err, fmt.Sprintf("%q", name))
			}
		})
	}
}

func TestValidateConfigBuiltInCode(t *testing.T) {
	c := Default()
	c.Pools = []PoolConfig{{Resource: "a.b/c", Drivers: []string{"x"}}}
	err := c.Validate()
	var fe *FieldError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "pools[0].replicas", fe.Field)
}

// FuzzParse checks that Parse never panics and that whatever it accepts
// is valid and survives a round trip through YAML.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"cdiKind: dri-cdi.dev/gpu\ndefaultPools: true\n",
		"pools:\n- resource: gpu.intel.com/i915\n  drivers: [i915]\n  pciIDs: [\"8086:56a0\", \"8086:*\"]\n  replicas: 2\n",
		"pools: [null]\n",
		"pools:\n- resource: a.b/c\n  drivers: [x]\n  replicas: 1e3\n",
		"a: &x [*x]\n",
		"{\"pools\": [{\"resource\": \"a.b/c\", \"pciIDs\": [\"1002:*\"]}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			require.Nil(t, c)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, c.Validate())
		out, err := yaml.Marshal(c)
		require.NoError(t, err)
		again, err := Parse(out)
		require.NoError(t, err, "re-parse of %q", out)
		require.Equal(t, c.Kind(), again.Kind())
		require.Equal(t, c.DefaultPools, again.DefaultPools)
		require.Equal(t, len(c.Pools), len(again.Pools))
		for i := range c.Pools {
			require.Equal(t, c.Pools[i].Resource, again.Pools[i].Resource)
			require.Equal(t, c.Pools[i].Replicas, again.Pools[i].Replicas)
		}
	})
}

func ptr[T any](v T) *T { return &v }
