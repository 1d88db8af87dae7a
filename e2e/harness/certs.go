package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is the cluster's certificate authority and every certificate and
// kubeconfig the control plane and the kubelet use, generated fresh for
// each cluster into one directory (removed with the cluster).
type PKI struct {
	Dir string
	// CA is the PEM file of the cluster CA (client and serving certs).
	CA string
	// APIServerCert and APIServerKey serve kube-apiserver.
	APIServerCert, APIServerKey string
	// ServiceAccountKey and ServiceAccountPub sign and verify tokens.
	ServiceAccountKey, ServiceAccountPub string
	// Kubeconfigs by user: admin, kubelet, controller-manager, scheduler.
	Kubeconfigs map[string]string

	server string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// clientIdentity is a kubeconfig user: its certificate's CN and O name
// the user and groups the API server's RBAC and Node authorizers know.
type clientIdentity struct {
	file, cn string
	orgs     []string
}

var clusterClients = []clientIdentity{
	{"admin", "kubernetes-admin", []string{"system:masters"}},
	{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}},
	{"controller-manager", "system:kube-controller-manager", nil},
	{"scheduler", "system:kube-scheduler", nil},
}

// newPKI writes the CA, the API server's serving cert (for 127.0.0.1, the
// kubernetes Service's first address and apiIP, the address it serves on),
// the service-account key pair, and one client cert + kubeconfig per
// control-plane user.
func newPKI(dir, server string, serviceIP, apiIP net.IP) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, Kubeconfigs: map[string]string{}, server: server}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := certTemplate("dri-cdi-e2e-ca", nil)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	p.caKey = key
	if p.caCert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	p.CA = filepath.Join(dir, "ca.crt")
	if err := writePEM(p.CA, "CERTIFICATE", der); err != nil {
		return nil, err
	}

	serving := certTemplate("kube-apiserver", nil)
	serving.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	serving.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), serviceIP}
	if apiIP != nil && !apiIP.IsLoopback() {
		serving.IPAddresses = append(serving.IPAddresses, apiIP)
	}
	serving.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if p.APIServerCert, p.APIServerKey, err = p.issue("apiserver", serving); err != nil {
		return nil, err
	}

	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	p.ServiceAccountKey = filepath.Join(dir, "sa.key")
	if err := writePEM(p.ServiceAccountKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	p.ServiceAccountPub = filepath.Join(dir, "sa.pub")
	if err := writePEM(p.ServiceAccountPub, "PUBLIC KEY", pub); err != nil {
		return nil, err
	}

	for _, c := range clusterClients {
		if err := p.addKubeconfig(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// addKubeconfig issues the client cert of c and writes its kubeconfig.
func (p *PKI) addKubeconfig(c clientIdentity) error {
	t := certTemplate(c.cn, c.orgs)
	t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	cert, key, err := p.issue(c.file, t)
	if err != nil {
		return err
	}
	kc := filepath.Join(p.Dir, c.file+".kubeconfig")
	if err := writeKubeconfig(kc, p.server, p.CA, cert, key, c.cn); err != nil {
		return err
	}
	p.Kubeconfigs[c.file] = kc
	return nil
}

// NodeKubeconfig issues the kubelet of node a client cert the Node
// authorizer knows (system:node:<node> in system:nodes) and returns its
// kubeconfig.
func (p *PKI) NodeKubeconfig(node string) (string, error) {
	file := "kubelet-" + node
	if err := p.addKubeconfig(clientIdentity{file, "system:node:" + node, []string{"system:nodes"}}); err != nil {
		return "", err
	}
	return p.Kubeconfigs[file], nil
}

func certTemplate(cn string, orgs []string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
}

// issue signs tmpl with the CA and writes <name>.crt and <name>.key.
func (p *PKI) issue(name string, tmpl *x509.Certificate) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return "", "", fmt.Errorf("issue %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(p.Dir, name+".crt"), filepath.Join(p.Dir, name+".key")
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certPath, keyPath, writePEM(keyPath, "EC PRIVATE KEY", keyDER)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func writeKubeconfig(path, server, ca, cert, key, user string) error {
	b64 := func(f string) (string, error) {
		data, err := os.ReadFile(f)
		return base64.StdEncoding.EncodeToString(data), err
	}
	caData, err := b64(ca)
	if err != nil {
		return err
	}
	certData, err := b64(cert)
	if err != nil {
		return err
	}
	keyData, err := b64(key)
	if err != nil {
		return err
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %q
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: e2e
  context:
    cluster: e2e
    user: %q
current-context: e2e
`, server, caData, user, certData, keyData, user)
	return os.WriteFile(path, []byte(kc), 0o600)
}
