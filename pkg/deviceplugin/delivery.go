package deviceplugin

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
