package dra

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
)

// The standard attributes of Kubernetes (resource.kubernetes.io/...)
// that the scheduler's matchAttribute and users' CEL compare across
// drivers: a NIC and a GPU under the same PCIe root, on the same NUMA
// node.
const (
	AttrPCIBusID draapi.QualifiedName = "resource.kubernetes.io/pciBusID"
	AttrPCIeRoot draapi.QualifiedName = "resource.kubernetes.io/pcieRoot"
	AttrNUMANode draapi.QualifiedName = "resource.kubernetes.io/numaNode"
)

// maxNUMANode bounds a NUMA node number read from sysfs.
const maxNUMANode = 1023

var pciBusIDForm = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$`)

// pciBusID checks that addr is a PCI address in its sysfs form
// (domain:bus:device.function, lower-case hex).
func pciBusID(addr string) error {
	if !pciBusIDForm.MatchString(addr) {
		return fmt.Errorf("PCI address %q is not of the form dddd:bb:dd.f", addr)
	}
	return nil
}

// pcieRoot is the PCIe root complex of the PCI device addr: the first
// directory under /sys/devices of the device's path, which
// /sys/bus/pci/devices/<addr> links to ("pci0000:00"). The link must
// lead under devices/pci and end in the device itself.
func pcieRoot(sysfsRoot, addr string) (string, error) {
	link := filepath.Join("bus", "pci", "devices", addr)
	target, err := os.Readlink(filepath.Join(sysfsRoot, link))
	if err != nil {
		return "", err
	}
	if filepath.IsAbs(target) {
		return "", fmt.Errorf("%s links to an absolute path %s", link, target)
	}
	rel := filepath.Clean(filepath.Join(filepath.Dir(link), target))
	parts := strings.Split(rel, string(filepath.Separator))
	switch {
	case len(parts) < 3 || parts[0] != "devices" || !strings.HasPrefix(parts[1], "pci"):
		return "", fmt.Errorf("%s links to %s, not under devices/pci*", link, rel)
	case parts[len(parts)-1] != addr:
		return "", fmt.Errorf("%s links to %s, which is not the device %s", link, rel, addr)
	}
	return parts[1], nil
}

// standardAttributes adds the PCI bus ID and PCIe root of a PCI card
// and the NUMA node of a card that has one. What cannot be read is left
// out and returned as a problem.
func standardAttributes(attrs map[draapi.QualifiedName]draapi.DeviceAttribute, id, pciAddress string, numaNode int, sysfsRoot string) []error {
	var problems []error
	if pciAddress != "" {
		if err := pciBusID(pciAddress); err != nil {
			problems = append(problems, fmt.Errorf("card %s: %w", id, err))
		} else {
			attrs[AttrPCIBusID] = draapi.DeviceAttribute{StringValue: ptr.To(pciAddress)}
			if root, err := pcieRoot(sysfsRoot, pciAddress); err != nil {
				problems = append(problems, fmt.Errorf("card %s: no %s attribute: %w", id, AttrPCIeRoot, err))
			} else {
				attrs[AttrPCIeRoot] = draapi.DeviceAttribute{StringValue: ptr.To(root)}
			}
		}
	}
	switch {
	case numaNode > maxNUMANode:
		problems = append(problems, fmt.Errorf("card %s: NUMA node %d is out of range (0 to %d)", id, numaNode, maxNUMANode))
	case numaNode >= 0:
		attrs[AttrNUMANode] = draapi.DeviceAttribute{IntValue: ptr.To(int64(numaNode))}
	}
	return problems
}
