package alloc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

const (
	// AnnotationPrefix starts every allocation annotation key.
	AnnotationPrefix = "dri-cdi.dev/alloc."
	// replicaSep separates a card ID from its replica index. Card IDs
	// (PCI addresses, platform device names) never contain it.
	replicaSep = "::"
	// AllDevice is the CDI device name that holds every card, so no card
	// may have it as its ID. Package cdi and the NRI plugin use this name.
	AllDevice = "all"
	// maxKeyName is the longest name part of an annotation key.
	maxKeyName = 63
)

// ErrBadAnnotation is wrapped by every Parse error.
var ErrBadAnnotation = errors.New("invalid dri-cdi allocation annotation")

// ErrBadDeviceID is wrapped by every ParseDeviceID error.
var ErrBadDeviceID = errors.New("invalid dri-cdi device ID")

// ReplicaID returns the kubelet device ID of replica n of a card.
func ReplicaID(cardID string, n int) string {
	return cardID + replicaSep + strconv.Itoa(n)
}

// ParseDeviceID splits a kubelet device ID into its card ID and replica
// index (-1 when the ID carries no replica suffix).
func ParseDeviceID(id string) (cardID string, replica int, err error) {
	card, rep, found := strings.Cut(id, replicaSep)
	if err := ValidCardID(card); err != nil {
		return "", 0, fmt.Errorf("%w %q: %w", ErrBadDeviceID, Truncate(id), err)
	}
	if !found {
		return card, -1, nil
	}
	n, err := strconv.Atoi(rep)
	if err != nil || n < 0 || strconv.Itoa(n) != rep {
		return "", 0, fmt.Errorf("%w %q: replica %q is not a non-negative integer", ErrBadDeviceID, Truncate(id), Truncate(rep))
	}
	return card, n, nil
}

// CardID returns the card ID of a kubelet device ID, or "" when the ID is
// not one of ours.
func CardID(id string) string {
	card, _, err := ParseDeviceID(id)
	if err != nil {
		return ""
	}
	return card
}

// ValidCardID checks that s can be a card ID: it must also be a valid CDI
// device name (letters, digits, '_', '-', '.', ':'), start with a letter
// or digit, be at most 128 bytes and not be "all". This rules out path traversal and
// separators in annotations.
func ValidCardID(s string) error {
	if s == "" {
		return errors.New("empty card ID")
	}
	if s == AllDevice {
		return fmt.Errorf("card ID %q is reserved for the CDI device that holds every card", s)
	}
	if len(s) > 128 {
		return fmt.Errorf("card ID is %d bytes, more than 128", len(s))
	}
	if strings.Contains(s, replicaSep) {
		return fmt.Errorf("card ID contains %q", replicaSep)
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '_' || r == '-' || r == '.' || r == ':'):
		default:
			return fmt.Errorf("card ID has invalid character %q at %d", r, i)
		}
	}
	return nil
}

// AnnotationKey returns the annotation key for a resource name. Names
// that do not fit a 63-byte key name are shortened with a hash, so two
// resources never share a key.
func AnnotationKey(resource string) string {
	name := strings.ReplaceAll(resource, "/", "_")
	full := "alloc." + name
	if len(full) > maxKeyName || !keyNameOK(name) {
		sum := sha256.Sum256([]byte(resource))
		h := hex.EncodeToString(sum[:])[:16]
		keep := maxKeyName - len("alloc.") - len(h) - 1
		clean := strings.Map(func(r rune) rune {
			if keyRune(r) {
				return r
			}
			return '_'
		}, name)
		if len(clean) > keep {
			clean = clean[:keep]
		}
		name = strings.Trim(clean, "._-") + "-" + h
	}
	return AnnotationPrefix + name
}

func keyRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

func keyNameOK(name string) bool {
	for _, r := range name {
		if !keyRune(r) {
			return false
		}
	}
	return name != ""
}

// Annotation returns the annotation key and value that record the device
// IDs allocated to a container for one resource. IDs are sorted.
func Annotation(resource string, deviceIDs []string) (key, value string) {
	return AnnotationKey(resource), AnnotationValue(resource, deviceIDs)
}

// AnnotationValue returns the value of Annotation alone, for a caller
// that computed the resource's key once (the device plugin's Allocate).
// deviceIDs is not modified.
func AnnotationValue(resource string, deviceIDs []string) string {
	ids := append([]string(nil), deviceIDs...)
	sort.Strings(ids)
	return resource + "=" + strings.Join(ids, ",")
}

// Request is what a container's allocation annotation says it was
// allocated under one resource: what it asks for, which the NRI plugin
// checks against the kubelet.
type Request struct {
	// Resource is the extended resource name, e.g. dri-cdi.dev/i915.
	Resource string
	// DeviceIDs are kubelet device IDs, sorted, without duplicates.
	DeviceIDs []string
}

// Parse extracts the allocation requests from container annotations. Keys
// without AnnotationPrefix are ignored. A key with the prefix whose value
// is malformed, names a resource whose key differs, or carries an invalid
// device ID is an error that names the key and the reason; no partial
// result is returned then.
func Parse(annotations map[string]string) ([]Request, error) {
	var reqs []Request
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		if strings.HasPrefix(k, AnnotationPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		c, err := parseValue(k, annotations[k])
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, c)
	}
	return reqs, nil
}

func parseValue(key, value string) (Request, error) {
	fail := func(format string, a ...any) (Request, error) {
		return Request{}, fmt.Errorf("%w %s: %s", ErrBadAnnotation, key, fmt.Sprintf(format, a...))
	}
	if len(value) > 64<<10 {
		return fail("value is %d bytes, more than 64 KiB", len(value))
	}
	resource, list, ok := strings.Cut(value, "=")
	if !ok {
		return fail("value %q is not <resource>=<id>[,<id>...]", Truncate(value))
	}
	if resource == "" || strings.ContainsAny(resource, " \t\n,=") {
		return fail("invalid resource name %q", Truncate(resource))
	}
	if AnnotationKey(resource) != key {
		return fail("resource %q belongs under key %s", Truncate(resource), AnnotationKey(resource))
	}
	if list == "" {
		return fail("no device IDs for %s", resource)
	}
	seen := map[string]bool{}
	var ids []string
	for _, id := range strings.Split(list, ",") {
		if _, _, err := ParseDeviceID(id); err != nil {
			return fail("%v", err)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return Request{Resource: resource, DeviceIDs: ids}, nil
}

// Truncate shortens untrusted input (annotation values, CDI device names)
// to 80 bytes plus "..." before it is quoted in an error, so a hostile pod
// cannot flood the logs. The NRI plugin's request errors use it too.
func Truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
