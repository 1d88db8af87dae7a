package test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, monitoringv1.AddToScheme,
		// DRA mode: RBAC, the ResourceSlice policy, DeviceClasses.
		rbacv1.AddToScheme, admissionregistrationv1.AddToScheme, resourcev1.AddToScheme,
		// The Flux example (../gitops/flux): the types of Flux's own API
		// modules, so that the example decodes as strictly as the rest.
		helmv2.AddToScheme, sourcev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

// Decode splits a multi-document YAML stream and decodes every document
// strictly into its Kubernetes API type: an unknown kind, an unknown or
// duplicated field or a value of the wrong type is an error that names the
// document. Documents with only comments are skipped.
func Decode(stream []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	deser := codecs.UniversalDeserializer()
	var objs []runtime.Object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if onlyComments(doc) {
			continue
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		obj, gvk, err := deser.Decode(js, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, firstLine(doc), err)
		}
		if gvk.Kind == "" || gvk.Version == "" {
			return nil, fmt.Errorf("document %d: no apiVersion/kind", i)
		}
		objs = append(objs, obj)
	}
}

func onlyComments(doc []byte) bool {
	for _, l := range strings.Split(string(doc), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && l != "---" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func firstLine(doc []byte) string {
	for _, l := range strings.Split(string(doc), "\n") {
		if l = strings.TrimSpace(l); l != "" && l != "---" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}
