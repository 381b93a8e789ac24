package config

import "github.com/hashicorp/hcl/v2"

// TLS is a tls block: file paths of PEM certificates and keys.
type TLS struct {
	// CA is the CA bundle to verify the peer with; "" means the system pool.
	// On the embedded broker it makes client certificates issued by this CA
	// required; "" there means no client certificates.
	CA string
	// Cert and Key are this side's certificate and key; both or neither.
	Cert, Key string
	// InsecureSkipVerify disables peer verification (clients only; testing).
	InsecureSkipVerify bool
	DeclRange          hcl.Range
}

var tlsBlock = hcl.BlockHeaderSchema{Type: "tls"}

// decodeTLS decodes the tls block among blocks, or returns nil. server says
// whether this is a listener, which needs cert and key and cannot skip
// verification.
func (d *decoder) decodeTLS(blocks hcl.Blocks, server bool) *TLS {
	b := d.single(blocks, "tls")
	if b == nil {
		return nil
	}
	names := []string{"ca", "cert", "key"}
	if !server {
		names = append(names, "insecure_skip_verify")
	}
	a, _ := d.content(b, names)
	t := &TLS{
		CA:                 a.str("ca", noVars, ""),
		Cert:               a.str("cert", noVars, ""),
		Key:                a.str("key", noVars, ""),
		InsecureSkipVerify: a.boolean("insecure_skip_verify", false),
		DeclRange:          b.DefRange,
	}
	if server {
		a.require("cert", "key")
	} else if (t.Cert == "") != (t.Key == "") {
		d.errorf(b.DefRange, "Incomplete client certificate", "Set both \"cert\" and \"key\" for a client certificate, or neither.")
	}
	return t
}

// AdminTLS is the agent's admin_tls block: the admin endpoint's certificate
// and key, and optionally a CA whose client certificates it then requires.
type AdminTLS struct {
	Cert, Key string
	// ClientCA, when set, makes a client certificate issued by it required.
	ClientCA  string
	DeclRange hcl.Range
}

var adminTLSBlock = hcl.BlockHeaderSchema{Type: "admin_tls"}

func (d *decoder) decodeAdminTLS(blocks hcl.Blocks) *AdminTLS {
	b := d.single(blocks, "admin_tls")
	if b == nil {
		return nil
	}
	a, _ := d.content(b, []string{"cert", "key", "client_ca"})
	a.require("cert", "key")
	return &AdminTLS{Cert: a.str("cert", noVars, ""), Key: a.str("key", noVars, ""),
		ClientCA: a.str("client_ca", noVars, ""), DeclRange: b.DefRange}
}
