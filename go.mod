module github.com/dri-cdi/dri-cdi

go 1.26.0

require (
	github.com/pelletier/go-toml/v2 v2.4.3
	github.com/sirupsen/logrus v1.10.2
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.50.0
	sigs.k8s.io/yaml v1.6.0
	tags.cncf.io/container-device-interface v1.1.2
)

require (
	github.com/fsnotify/fsnotify v1.7.0 // indirect
	github.com/opencontainers/runtime-spec v1.3.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	tags.cncf.io/container-device-interface/specs-go v1.1.1 // indirect
)
