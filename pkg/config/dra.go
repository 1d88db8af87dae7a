package config

// Names of the dri-cdi DRA driver that more than one binary needs
// (dri-cdi-dra serves them, dri-cdi-nri and doctor check them). They live
// here, not in the DRA plugin's package, so that the NRI plugin and the
// CLI do not link the DRA plugin and client-go.
const (
	// DRADriver is the name of the dri-cdi DRA driver: the driver of its
	// ResourceSlices and DeviceClasses, and the driver dri-cdi-nri trusts
	// in PodResources DynamicResources.
	DRADriver = "dri-cdi.dev"
	// DRARegistrarDir is the kubelet's plugin registration directory,
	// where a DRA driver's registration socket appears.
	DRARegistrarDir = "/var/lib/kubelet/plugins_registry"
	// DRAPluginDataDir is the DRA plugin's default data dir (the
	// kubelet's plugins dir and the driver name): its DRA socket and its
	// checkpoint, which dri-cdi-nri reads.
	DRAPluginDataDir = "/var/lib/kubelet/plugins/" + DRADriver
	// DRARegistrationSocket is the registration socket's name in
	// DRARegistrarDir without rolling updates ("<driver>-reg.sock", the
	// name the kubeletplugin helper of k8s.io/dynamic-resource-allocation
	// gives it too); with rolling updates it is "<driver>-<pod UID>-reg.sock".
	DRARegistrationSocket = DRADriver + "-reg.sock"
)
