package kubeletcheckpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	// FileName is the checkpoint's name inside the kubelet's
	// device-plugins directory.
	FileName = "kubelet_internal_checkpoint"
	// DefaultPath is the checkpoint of a kubelet with the default root
	// dir. The kubelet serves its device-plugins dir from
	// /var/lib/kubelet/device-plugins even with another --root-dir.
	DefaultPath = pluginapi.DevicePluginPath + FileName
	// MaxSize bounds the file read: a checkpoint of thousands of
	// allocations is a few MiB.
	MaxSize = 16 << 20
)

var (
	// ErrInvalid is wrapped by every error about a malformed checkpoint.
	ErrInvalid = errors.New("invalid kubelet device manager checkpoint")
	// ErrNotAllocated is returned when the checkpoint records no
	// allocation for the container.
	ErrNotAllocated = errors.New("the kubelet checkpoint records no allocation for this container")
)

// Entry is one allocation: the device IDs of one resource allocated to one
// container of one pod.
type Entry struct {
	PodUID, ContainerName, ResourceName string
	// DeviceIDs are the allocated IDs of every NUMA node, sorted, each once.
	DeviceIDs []string
}

// Checkpoint is a parsed checkpoint.
type Checkpoint struct {
	// Entries are the allocations in file order.
	Entries []Entry
}

// The file's layout; see the package doc.
type fileData struct {
	Data *struct {
		PodDeviceEntries []struct {
			PodUID        string
			ContainerName string
			ResourceName  string
			DeviceIDs     map[string][]string
		}
	}
}

// Parse decodes a checkpoint. Every entry needs a pod UID, a container
// name, a resource name and NUMA keys that are integers; anything else is
// an error wrapping ErrInvalid that names the entry and the reason. An
// error rejects the whole file: a partly read checkpoint could hide an
// allocation, never grant one, but it also hides a broken kubelet.
func Parse(data []byte) (*Checkpoint, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalid, len(data), MaxSize)
	}
	var f fileData
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalid)
	}
	if f.Data == nil {
		return nil, fmt.Errorf("%w: no \"Data\" object", ErrInvalid)
	}
	cp := &Checkpoint{Entries: make([]Entry, 0, len(f.Data.PodDeviceEntries))}
	for i, e := range f.Data.PodDeviceEntries {
		switch {
		case e.PodUID == "":
			return nil, fmt.Errorf("%w: entry %d: empty PodUID", ErrInvalid, i)
		case e.ContainerName == "":
			return nil, fmt.Errorf("%w: entry %d (pod %s): empty ContainerName", ErrInvalid, i, e.PodUID)
		case e.ResourceName == "":
			return nil, fmt.Errorf("%w: entry %d (pod %s, container %q): empty ResourceName", ErrInvalid, i, e.PodUID, e.ContainerName)
		}
		var ids []string
		for numa, list := range e.DeviceIDs {
			if _, err := strconv.ParseInt(numa, 10, 64); err != nil {
				return nil, fmt.Errorf("%w: entry %d (pod %s, container %q): NUMA node %q is not an integer",
					ErrInvalid, i, e.PodUID, e.ContainerName, numa)
			}
			for _, id := range list {
				if id == "" {
					return nil, fmt.Errorf("%w: entry %d (pod %s, container %q): empty device ID", ErrInvalid, i, e.PodUID, e.ContainerName)
				}
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		cp.Entries = append(cp.Entries, Entry{
			PodUID: e.PodUID, ContainerName: e.ContainerName, ResourceName: e.ResourceName,
			DeviceIDs: slices.Compact(ids),
		})
	}
	return cp, nil
}

// ContainerDevices returns the device IDs allocated to container of the
// pod with UID podUID, by resource name, or an error wrapping
// ErrNotAllocated when the checkpoint has none.
func (c *Checkpoint) ContainerDevices(podUID, container string) (map[string][]string, error) {
	var out map[string][]string
	for _, e := range c.Entries {
		if e.PodUID != podUID || e.ContainerName != container || len(e.DeviceIDs) == 0 {
			continue
		}
		if out == nil {
			out = map[string][]string{}
		}
		ids := append(out[e.ResourceName], e.DeviceIDs...)
		slices.Sort(ids)
		out[e.ResourceName] = slices.Compact(ids)
	}
	if out == nil {
		return nil, fmt.Errorf("%w: pod UID %s, container %q", ErrNotAllocated, podUID, container)
	}
	return out, nil
}
