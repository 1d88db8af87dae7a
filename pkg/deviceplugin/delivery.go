package deviceplugin

import "github.com/dri-cdi/dri-cdi/pkg/deviceplugin/dpapi"

// Delivery says how Allocate hands devices to the container runtime
// (dpapi.Delivery, whose doc says when to use which).
type Delivery = dpapi.Delivery

// The delivery modes (dpapi).
const (
	DeliveryCDICRI      = dpapi.DeliveryCDICRI
	DeliveryNRI         = dpapi.DeliveryNRI
	DeliveryDeviceSpecs = dpapi.DeliveryDeviceSpecs
)

// ParseDelivery checks a --delivery value (dpapi.ParseDelivery).
func ParseDelivery(s string) (Delivery, error) { return dpapi.ParseDelivery(s) }
