package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/dri-cdi/dri-cdi/pkg/drm"

	"github.com/dri-cdi/dri-cdi/cdi"
)

const (
	// DefaultPoolPrefix starts the resource name of every default pool:
	// dri-cdi.dev/<driver>. A DRA DeviceClass carries the same name as its
	// extendedResourceName, so a pod's request means the same on both.
	DefaultPoolPrefix = DRADriver + "/"
	// MaxReplicas bounds replicas, so that a typo cannot make the agent
	// advertise millions of devices.
	MaxReplicas = 1000
	// MaxShares bounds shares the same way.
	MaxShares = 1000
)

// ErrInvalid is wrapped by every error about the content of a config.
var ErrInvalid = errors.New("invalid config")

// FieldError is one invalid field, named by its path in the file, e.g.
// "pools[1].replicas".
type FieldError struct {
	// Field is the path of the field: "cdiKind", "pools[0].pciIDs[2]".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "<field>: <reason>".
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, format string, a ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, a...)}
}

// Config is the parsed configuration. Start from Default() when building
// one in code: the zero value has DefaultPools off.
type Config struct {
	// CDIKind is the CDI kind ("vendor/class") of the generated specs;
	// empty means cdi.DefaultKind. Use Kind() to read it.
	CDIKind string `json:"cdiKind,omitempty"`
	// DefaultPools gives every card that no configured pool took a pool
	// of its driver, dri-cdi.dev/<driver>.
	DefaultPools bool `json:"defaultPools"`
	// Pools are tried in order; a card belongs to the first that takes it.
	Pools []PoolConfig `json:"pools,omitempty"`
}

// PoolConfig defines one pool: which cards it takes and how it
// advertises them.
type PoolConfig struct {
	// Resource is the Kubernetes extended resource name, e.g.
	// gpu.intel.com/i915.
	Resource string `json:"resource"`
	// Drivers, when set, limits the pool to cards bound to one of these
	// kernel drivers.
	Drivers []string `json:"drivers,omitempty"`
	// PCIIDs, when set, limits the pool to PCI cards whose "vendor:device"
	// matches one entry; "vvvv:*" matches any device of a vendor.
	PCIIDs []string `json:"pciIDs,omitempty"`
	// IncludeDisplayOnly lets the pool take cards without a render node.
	IncludeDisplayOnly bool `json:"includeDisplayOnly,omitempty"`
	// Replicas is the number of schedulable device IDs per card, >= 1.
	Replicas int `json:"replicas"`
	// AllowSameCardReplicas lets one container receive two replicas of
	// the same card.
	AllowSameCardReplicas bool `json:"allowSameCardReplicas,omitempty"`
	// Shares, when set, makes each card of the pool a shared DRA device
	// of this many shares (1 to MaxShares): the scheduler places up to
	// that many claims on it, each taking one share unless it asks for
	// more. Unset, a DRA claim gets the card exclusively. The device
	// plugin does not use it (see Replicas).
	Shares *int `json:"shares,omitempty"`
	// RequireMemoryLimit makes dri-cdi-nri fail a container whose share
	// of a card of this pool was allocated device memory that the node
	// cannot limit (no cgroup v2, no dmem controller, no dmem region of
	// the card, dmem not delegated to the container's cgroup); unset, the
	// container starts without the limit and the reason is logged and
	// counted. Needs Shares: only shares are allocated memory.
	RequireMemoryLimit bool `json:"requireMemoryLimit,omitempty"`
	// Companions are device nodes every container that gets a card of
	// this pool gets too (drm.Companion): a SoC's codec, DMA heaps, ...
	Companions []drm.Companion `json:"companions,omitempty"`
}

// Default returns the configuration used without a config file: the
// default CDI kind and one pool per driver.
func Default() *Config {
	return &Config{DefaultPools: true}
}

// Load reads and validates the config file at path. An empty path gives
// Default().
func Load(path string) (*Config, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates a YAML config. Empty input gives Default().
// Errors wrap ErrInvalid and name the field.
func Parse(data []byte) (*Config, error) {
	c := Default()
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := decodeConfig(j, c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks every field and returns all problems found, each a
// *FieldError wrapping ErrInvalid.
func (c *Config) Validate() error {
	var errs []error
	if c.CDIKind != "" {
		if err := validKind(c.CDIKind); err != nil {
			errs = append(errs, fieldErr("cdiKind", "%v", err))
		}
	}
	used := map[string]int{}
	for i, p := range c.Pools {
		path := fmt.Sprintf("pools[%d]", i)
		if p.Resource == "" {
			errs = append(errs, fieldErr(path+".resource", "required"))
		} else if err := ValidResourceName(p.Resource); err != nil {
			errs = append(errs, fieldErr(path+".resource", "%v", err))
		} else if j, dup := used[p.Resource]; dup {
			errs = append(errs, fieldErr(path+".resource", "%q is already used by pools[%d]", p.Resource, j))
		} else {
			used[p.Resource] = i
		}
		if len(p.Drivers) == 0 && len(p.PCIIDs) == 0 {
			errs = append(errs, fieldErr(path, "set drivers, pciIDs or both to say which cards the pool takes"))
		}
		for k, d := range p.Drivers {
			if err := validDriver(d); err != nil {
				errs = append(errs, fieldErr(fmt.Sprintf("%s.drivers[%d]", path, k), "%v", err))
			}
		}
		for k, comp := range p.Companions {
			if err := comp.Validate(); err != nil {
				errs = append(errs, fieldErr(fmt.Sprintf("%s.companions[%d]", path, k), "%v", err))
			}
		}
		for k, id := range p.PCIIDs {
			if err := validPCIID(id); err != nil {
				errs = append(errs, fieldErr(fmt.Sprintf("%s.pciIDs[%d]", path, k), "%v", err))
			}
		}
		if p.Replicas < 1 {
			errs = append(errs, fieldErr(path+".replicas", "must be >= 1"))
		} else if p.Replicas > MaxReplicas {
			errs = append(errs, fieldErr(path+".replicas", "must be <= %d", MaxReplicas))
		}
		if p.Shares != nil && (*p.Shares < 1 || *p.Shares > MaxShares) {
			errs = append(errs, fieldErr(path+".shares", "must be between 1 and %d (leave it out for exclusive DRA claims)", MaxShares))
		}
		if p.RequireMemoryLimit && p.Shares == nil {
			errs = append(errs, fieldErr(path+".requireMemoryLimit", "needs shares: device memory is allocated to shares of a card only"))
		}
	}
	return errors.Join(errs...)
}

// Kind returns the CDI kind of the specs: CDIKind, or cdi.DefaultKind.
func (c *Config) Kind() string {
	if c == nil || c.CDIKind == "" {
		return cdi.DefaultKind
	}
	return c.CDIKind
}

// RequiresMemoryLimit reports whether the pool of resource name has
// requireMemoryLimit set.
func (c *Config) RequiresMemoryLimit(name string) bool {
	if c == nil {
		return false
	}
	for _, p := range c.Pools {
		if p.Resource == name {
			return p.RequireMemoryLimit
		}
	}
	return false
}

// ServesResource reports whether name is a resource dri-cdi may
// advertise under this config: a configured pool's resource, or, with
// default pools, any valid dri-cdi.dev/<driver> name.
func (c *Config) ServesResource(name string) bool {
	if c == nil {
		c = Default()
	}
	for _, p := range c.Pools {
		if p.Resource == name {
			return true
		}
	}
	return c.DefaultPools && strings.HasPrefix(name, DefaultPoolPrefix) && ValidResourceName(name) == nil
}

// validKind checks a CDI kind, "vendor/class".
func validKind(kind string) error {
	vendor, class, ok := strings.Cut(kind, "/")
	if !ok {
		return fmt.Errorf("%q is not a CDI kind <vendor>/<class>", kind)
	}
	if err := parser.ValidateVendorName(vendor); err != nil {
		return fmt.Errorf("%q: %w", kind, err)
	}
	if err := parser.ValidateClassName(class); err != nil {
		return fmt.Errorf("%q: %w", kind, err)
	}
	return nil
}

func validDriver(d string) error {
	if d == "" {
		return errors.New("empty driver name")
	}
	if err := checkName(d, false); err != nil {
		return fmt.Errorf("driver name %q %w", d, err)
	}
	return nil
}

// checkName applies the rule driver names and the name part of an
// extended resource name share: at most 63 bytes of letters, digits, '-',
// '_' and '.', and with alnumEnds starting and ending with a letter or
// digit. The error says what is wrong; the caller says whose name it is.
func checkName(s string, alnumEnds bool) error {
	if len(s) > 63 {
		return errors.New("is longer than 63 bytes")
	}
	if alnumEnds && (!alnum(s[0]) || !alnum(s[len(s)-1])) {
		return errors.New("must start and end with a letter or digit")
	}
	for _, r := range s {
		if !nameRune(r) {
			return fmt.Errorf("has invalid character %q", r)
		}
	}
	return nil
}

func validPCIID(id string) error {
	vendor, device, ok := strings.Cut(id, ":")
	if !ok || !hex4(vendor) || (device != "*" && !hex4(device)) {
		return fmt.Errorf("%q is not a PCI vendor:device like 8086:56a0 or 8086:*", id)
	}
	return nil
}

func hex4(s string) bool {
	if len(s) != 4 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}

func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
}

func alnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// ValidResourceName checks that name is a Kubernetes extended resource
// name, as the kubelet requires of a device plugin: "<domain>/<name>"
// where the domain is a DNS-1123 subdomain outside kubernetes.io and the
// name is at most 63 letters, digits, '-', '_' or '.', starting and ending
// with a letter or digit.
func ValidResourceName(name string) error {
	domain, short, ok := strings.Cut(name, "/")
	if !ok || domain == "" || short == "" || strings.Contains(short, "/") {
		return fmt.Errorf("%q is not an extended resource name <domain>/<name>", name)
	}
	if strings.Contains(name, "kubernetes.io/") {
		return fmt.Errorf("%q: the kubernetes.io domain is reserved for native resources", name)
	}
	// The API server also checks "requests.<name>", so the domain must
	// leave room for that prefix within 253 bytes.
	if len(domain) > 253-len("requests.") {
		return fmt.Errorf("%q: domain is longer than %d bytes", name, 253-len("requests."))
	}
	for _, label := range strings.Split(domain, ".") {
		if !dnsLabel(label) {
			return fmt.Errorf("%q: domain %q is not a lowercase DNS-1123 subdomain", name, domain)
		}
	}
	if err := checkName(short, true); err != nil {
		return fmt.Errorf("%q: name part %w", name, err)
	}
	return nil
}

func dnsLabel(l string) bool {
	if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// DefaultPoolResource returns the default pool resource of a driver,
// dri-cdi.dev/<driver>, or "" when the driver name cannot form a valid
// resource name.
func DefaultPoolResource(driver string) string {
	name := DefaultPoolPrefix + driver
	if ValidResourceName(name) != nil {
		return ""
	}
	return name
}

// decodeConfig fills c from the JSON form of the file. It walks the
// document itself instead of using json.Decoder.DisallowUnknownFields so
// that every error names the full path of the field, list index included,
// and field names match exactly (encoding/json would accept "Replicas").
func decodeConfig(j []byte, c *Config) error {
	if string(bytes.TrimSpace(j)) == "null" {
		return nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(j, &top); err != nil {
		return fieldErr("(top level)", "want a mapping, got %s", jsonType(j))
	}
	return decodeFields("", top, []field{
		{"cdiKind", into(&c.CDIKind)},
		{"defaultPools", into(&c.DefaultPools)},
		{"pools", func(path string, v json.RawMessage) error {
			var raw []json.RawMessage
			if err := decodeValue(path, v, &raw); err != nil {
				return err
			}
			c.Pools = make([]PoolConfig, len(raw))
			for i, r := range raw {
				if err := decodePool(fmt.Sprintf("pools[%d]", i), r, &c.Pools[i]); err != nil {
					return err
				}
			}
			return nil
		}},
	})
}

func decodePool(path string, j json.RawMessage, p *PoolConfig) error {
	var m map[string]json.RawMessage
	if isNull(j) || json.Unmarshal(j, &m) != nil {
		return fieldErr(path, "want a mapping, got %s", jsonType(j))
	}
	p.Replicas = 1
	return decodeFields(path, m, []field{
		{"resource", into(&p.Resource)},
		{"drivers", into(&p.Drivers)},
		{"pciIDs", into(&p.PCIIDs)},
		{"includeDisplayOnly", into(&p.IncludeDisplayOnly)},
		{"replicas", into(&p.Replicas)},
		{"allowSameCardReplicas", into(&p.AllowSameCardReplicas)},
		{"shares", into(&p.Shares)},
		{"requireMemoryLimit", into(&p.RequireMemoryLimit)},
		{"companions", func(path string, v json.RawMessage) error {
			var raw []json.RawMessage
			if err := decodeValue(path, v, &raw); err != nil {
				return err
			}
			p.Companions = make([]drm.Companion, len(raw))
			for i, r := range raw {
				cpath := fmt.Sprintf("%s[%d]", path, i)
				var m map[string]json.RawMessage
				if isNull(r) || json.Unmarshal(r, &m) != nil {
					return fieldErr(cpath, "want a mapping, got %s", jsonType(r))
				}
				c := &p.Companions[i]
				if err := decodeFields(cpath, m, []field{
					{"subsystem", into(&c.Subsystem)},
					{"path", into(&c.Path)},
				}); err != nil {
					return err
				}
			}
			return nil
		}},
	})
}

// field is one known key of a mapping in the file and how its value is
// decoded; decode gets the field's full path for its errors.
type field struct {
	name   string
	decode func(path string, v json.RawMessage) error
}

// into decodes a field's value into dst with decodeValue.
func into(dst any) func(string, json.RawMessage) error {
	return func(path string, v json.RawMessage) error { return decodeValue(path, v, dst) }
}

// decodeFields decodes the keys of the mapping m at path ("" for the top
// level) in sorted order, so that the first error is always the same; a
// key that is none of fields is an error that lists the known ones.
func decodeFields(path string, m map[string]json.RawMessage, fields []field) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		f := k
		if path != "" {
			f = path + "." + k
		}
		i := slices.IndexFunc(fields, func(fl field) bool { return fl.name == k })
		if i < 0 {
			known := make([]string, len(fields))
			for n, fl := range fields {
				known[n] = fl.name
			}
			return fieldErr(f, "unknown field (known: %s)", strings.Join(known, ", "))
		}
		if err := fields[i].decode(f, m[k]); err != nil {
			return err
		}
	}
	return nil
}

// decodeValue decodes one field; null leaves the default in place.
func decodeValue(field string, j json.RawMessage, dst any) error {
	if isNull(j) {
		return nil
	}
	if list, ok := dst.(*[]string); ok {
		return decodeStrings(field, j, list)
	}
	if err := json.Unmarshal(j, dst); err != nil {
		want := "a value of another type"
		switch dst.(type) {
		case *string:
			want = "a string"
		case *bool:
			want = "true or false"
		case *int, **int:
			want = "an integer"
		case *[]json.RawMessage:
			want = "a list"
		}
		return fieldErr(field, "want %s, got %s", want, jsonType(j))
	}
	return nil
}

// decodeStrings decodes a list of strings, naming the offending element.
// YAML 1.1 reads unquoted y, n, yes, no, on and off as booleans, so this
// error is common for short driver names.
func decodeStrings(field string, j json.RawMessage, dst *[]string) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(j, &raw); err != nil {
		return fieldErr(field, "want a list of strings, got %s", jsonType(j))
	}
	out := make([]string, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil || isNull(r) {
			return fieldErr(fmt.Sprintf("%s[%d]", field, i), "want a string (quote it), got %s", jsonType(r))
		}
	}
	*dst = out
	return nil
}

func isNull(j []byte) bool { return string(bytes.TrimSpace(j)) == "null" }

// jsonType describes a JSON value for error messages without echoing
// large inputs.
func jsonType(j []byte) string {
	j = bytes.TrimSpace(j)
	if len(j) == 0 {
		return "nothing"
	}
	switch j[0] {
	case '{':
		return "a mapping"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	if len(j) > 24 {
		return "a number"
	}
	return "the number " + string(j)
}
