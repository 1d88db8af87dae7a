// Package test renders dri-cdi's deployment manifests offline, the
// kustomize base with every overlay and component and the Helm chart with
// its value sets, decodes every object strictly into the Kubernetes API
// types, compares the output with golden files and checks the privileges
// of each container.
//
// It is a module of its own so that the product's go.mod does not depend
// on kustomize, Helm or the Kubernetes API types. Run it with
//
//	cd deployments/test && go test ./...
//
// and rewrite the golden files after an intended change with
//
//	go test ./... -update
package test
