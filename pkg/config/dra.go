package config

// Names of the dri-cdi DRA driver that more than one binary needs
// (dri-cdi-dra serves them, dri-cdi-nri and doctor check them). They live
// here, not in the DRA plugin's package, so that the NRI plugin and the
// CLI do not link the kubelet plugin helper and client-go.
const (
	// DRADriver is the name of the dri-cdi DRA driver: the driver of its
	// ResourceSlices and DeviceClasses, and the driver dri-cdi-nri trusts
	// in PodResources DynamicResources.
	DRADriver = "dri-cdi.dev"
	// DRARegistrarDir is the kubelet's plugin registration directory,
	// where a DRA driver's registration socket appears.
	DRARegistrarDir = "/var/lib/kubelet/plugins_registry"
	// DRARegistrationSocket is the registration socket's name in
	// DRARegistrarDir without rolling updates (the kubelet plugin
	// helper's default, "<driver>-reg.sock"); with rolling updates it is
	// "<driver>-<pod UID>-reg.sock".
	DRARegistrationSocket = DRADriver + "-reg.sock"
)
