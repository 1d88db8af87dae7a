package usage

import (
	"bytes"
	"errors"
	"math/bits"
	"strconv"
	"strings"
)

// ErrNotDRM reports an fdinfo text without the mandatory drm-driver key:
// the file is not a DRM client, or its driver writes no usage stats.
var ErrNotDRM = errors.New("no drm-driver key")

// Engine holds what one fdinfo says about one engine (drm-engine-<name>
// and its companions). The Has fields tell a zero from a missing key.
type Engine struct {
	// BusyNS is drm-engine-<name>: nanoseconds the engine spent busy
	// with this client's work.
	BusyNS    uint64
	HasBusyNS bool
	// Capacity is drm-engine-capacity-<name>: how many identical engines
	// the name stands for; 1 when the key is missing.
	Capacity uint64
	// Cycles is drm-cycles-<name>: busy cycles.
	Cycles    uint64
	HasCycles bool
	// TotalCycles is drm-total-cycles-<name>: a GPU timestamp in the
	// same unit as Cycles; Cycles and TotalCycles together give busy time.
	TotalCycles    uint64
	HasTotalCycles bool
	// MaxFreqHz is drm-maxfreq-<name> in Hz; with Cycles it gives use
	// relative to the engine's top frequency, not busy time.
	MaxFreqHz    uint64
	HasMaxFreqHz bool
}

// Memory kinds, the <kind> of drm-<kind>-<region>. drm-memory-<region>
// is the deprecated alias of drm-resident-<region>.
const (
	KindTotal     = "total"
	KindShared    = "shared"
	KindResident  = "resident"
	KindPurgeable = "purgeable"
	KindActive    = "active"
)

// Kinds lists the memory kinds in the order they are reported.
var Kinds = []string{KindTotal, KindShared, KindResident, KindPurgeable, KindActive}

// FDInfo is the parsed DRM part of one /proc/<pid>/fdinfo/<fd>.
type FDInfo struct {
	// Driver is drm-driver, the only mandatory key.
	Driver string
	// PDev is drm-pdev, the PCI address for PCI devices.
	PDev string
	// ClientID is drm-client-id: one DRM file, however many fds or
	// processes share it.
	ClientID    uint64
	HasClientID bool
	// ClientName is drm-client-name, set by the application.
	ClientName string
	// Engines by the driver's engine name.
	Engines map[string]*Engine
	// Memory by region, then kind, in bytes.
	Memory map[string]map[string]uint64
	// Malformed counts drm- lines that were skipped: no value, a value
	// that is not a number, an unknown unit, an overflow, a zero capacity.
	Malformed int
}

// Key prefixes, longest first where one is the prefix of another.
const (
	keyEngineCapacity = "drm-engine-capacity-"
	keyEngine         = "drm-engine-"
	keyTotalCycles    = "drm-total-cycles-"
	keyCycles         = "drm-cycles-"
	keyMaxFreq        = "drm-maxfreq-"
	keyMemory         = "drm-memory-"
)

// ParseFDInfo parses the text of one fdinfo file after the format of the
// kernel's Documentation/gpu/drm-usage-stats.rst: one "key: value" per
// line, keys starting with drm-, numbers with an optional unit. Lines
// that are not drm- keys (pos, flags, driver-private keys) and drm- keys
// it does not know are ignored; drm- lines whose value cannot be read are
// skipped and counted in Malformed. It returns ErrNotDRM when drm-driver
// is missing.
func ParseFDInfo(text []byte) (*FDInfo, error) {
	info := &FDInfo{}
	for len(text) > 0 {
		var line []byte
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			line, text = text, nil
		}
		if !bytes.HasPrefix(line, []byte("drm-")) {
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			info.Malformed++
			continue
		}
		key := string(line[:colon])
		value := strings.TrimSpace(string(line[colon+1:]))
		if !info.parseLine(key, value) {
			info.Malformed++
		}
	}
	if info.Driver == "" {
		return nil, ErrNotDRM
	}
	return info, nil
}

// parseLine applies one drm- key; false means malformed.
func (f *FDInfo) parseLine(key, value string) bool {
	switch key {
	case "drm-driver":
		f.Driver = value
		return value != ""
	case "drm-pdev":
		f.PDev = value
		return value != ""
	case "drm-client-id":
		n, err := strconv.ParseUint(value, 10, 64)
		f.ClientID, f.HasClientID = n, err == nil
		return err == nil
	case "drm-client-name":
		f.ClientName = value
		return true
	}
	if name, ok := cut(key, keyEngineCapacity); ok {
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil || n == 0 {
			return false
		}
		f.engine(name).Capacity = n
		return true
	}
	if name, ok := cut(key, keyEngine); ok {
		n, ok := number(value, timeUnits)
		if ok {
			e := f.engine(name)
			e.BusyNS, e.HasBusyNS = n, true
		}
		return ok
	}
	if name, ok := cut(key, keyTotalCycles); ok {
		n, err := strconv.ParseUint(value, 10, 64)
		if err == nil {
			e := f.engine(name)
			e.TotalCycles, e.HasTotalCycles = n, true
		}
		return err == nil
	}
	if name, ok := cut(key, keyCycles); ok {
		n, err := strconv.ParseUint(value, 10, 64)
		if err == nil {
			e := f.engine(name)
			e.Cycles, e.HasCycles = n, true
		}
		return err == nil
	}
	if name, ok := cut(key, keyMaxFreq); ok {
		n, ok := number(value, freqUnits)
		if ok {
			e := f.engine(name)
			e.MaxFreqHz, e.HasMaxFreqHz = n, true
		}
		return ok
	}
	if region, ok := cut(key, keyMemory); ok {
		return f.memory(region, KindResident, value)
	}
	for _, kind := range Kinds {
		if region, ok := cut(key, "drm-"+kind+"-"); ok {
			return f.memory(region, kind, value)
		}
	}
	// An unknown drm- key (drm-curfreq-, a newer key): ignored.
	return true
}

func (f *FDInfo) engine(name string) *Engine {
	if f.Engines == nil {
		f.Engines = map[string]*Engine{}
	}
	e := f.Engines[name]
	if e == nil {
		e = &Engine{Capacity: 1}
		f.Engines[name] = e
	}
	return e
}

func (f *FDInfo) memory(region, kind, value string) bool {
	n, ok := number(value, memUnits)
	if !ok {
		return false
	}
	if f.Memory == nil {
		f.Memory = map[string]map[string]uint64{}
	}
	if f.Memory[region] == nil {
		f.Memory[region] = map[string]uint64{}
	}
	f.Memory[region][kind] = n
	return true
}

// cut returns the rest of key after prefix; a key that is only the
// prefix names nothing.
func cut(key, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	return rest, ok && rest != ""
}

var (
	timeUnits = map[string]uint64{"": 1, "ns": 1}
	memUnits  = map[string]uint64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20}
	freqUnits = map[string]uint64{"": 1, "Hz": 1, "KHz": 1e3, "kHz": 1e3, "MHz": 1e6}
)

// number reads "<uint>[ <unit>]" with a unit from units, scaled to the
// base unit; overflow is malformed.
func number(value string, units map[string]uint64) (uint64, bool) {
	digits, unit, _ := strings.Cut(value, " ")
	unit = strings.TrimSpace(unit)
	mult, ok := units[unit]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 {
		return 0, false
	}
	return lo, true
}
