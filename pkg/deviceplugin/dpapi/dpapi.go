// Package dpapi holds the contracts of dri-cdi's device plugin that other
// parts name without linking the plugin itself (the doctor, the e2e
// harness): the delivery modes, the kubelet's device plugin directory and
// the prefix of our sockets in it. pkg/deviceplugin re-exports them.
package dpapi

import "fmt"

// Delivery says how Allocate hands devices to the container runtime.
type Delivery string

// The delivery modes; docs/architecture.md explains when to use which.
const (
	// DeliveryCDICRI returns CDI device names (one per card) and the
	// allocation annotation. The runtime injects the devices from our
	// CDI specs.
	DeliveryCDICRI Delivery = "cdi-cri"
	// DeliveryNRI returns only the allocation annotation; the dri-cdi NRI
	// plugin injects the devices. No CDI names are sent, because a
	// runtime that cannot resolve them fails the container.
	DeliveryNRI Delivery = "nri"
	// DeliveryDeviceSpecs returns a DeviceSpec (rw) for every node of each
	// card, and the allocation annotation.
	DeliveryDeviceSpecs Delivery = "device-specs"
)

// ParseDelivery checks a --delivery value.
func ParseDelivery(s string) (Delivery, error) {
	switch d := Delivery(s); d {
	case DeliveryCDICRI, DeliveryNRI, DeliveryDeviceSpecs:
		return d, nil
	}
	return "", fmt.Errorf("invalid delivery mode %q: want %s, %s or %s", s, DeliveryCDICRI, DeliveryNRI, DeliveryDeviceSpecs)
}

// DefaultKubeletDir is the kubelet's device-plugins directory on a
// standard node: pluginapi.DevicePluginPath without its trailing slash
// (the kubelet serves it there even with --root-dir).
const DefaultKubeletDir = "/var/lib/kubelet/device-plugins"

// SocketPrefix starts the name of every socket the device plugin serves
// in the kubelet dir; no other plugin's socket is ever touched.
const SocketPrefix = "dri-cdi-"
