module github.com/dri-cdi/dri-cdi

go 1.26

require (
	github.com/sirupsen/logrus v1.10.2
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.13.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
