package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Embedded is the broker value that names the agent's own embedded broker
// (the top-level broker block) instead of a URL.
const Embedded = "embedded"

// brokerSchemes are the URL schemes paho dials.
var brokerSchemes = []string{"tcp", "ssl", "ws", "wss"}

// isLoopback reports whether a "host:port" listen address binds only the
// loopback interface. An empty host, 0.0.0.0 and :: bind every interface; a
// host name other than "localhost" may resolve anywhere, so it counts as not
// loopback. No name is resolved.
func isLoopback(hostport string) (bool, error) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false, fmt.Errorf("config: %q is not a host:port address: %w", hostport, err)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// validateListen checks a "host:port" listen address with a numeric port.
func validateListen(hostport string) error {
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("config: %q is not a host:port address: %w", hostport, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return fmt.Errorf("config: %q has no valid port", hostport)
	}
	return nil
}

// validateBrokerURL checks a broker URL: scheme tcp, ssl, ws or wss, a host,
// and for tcp and ssl a port (paho dials host:port as given).
func validateBrokerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	known := false
	for _, sch := range brokerSchemes {
		known = known || u.Scheme == sch
	}
	if !known {
		return errors.New("config: unsupported scheme")
	}
	if u.Hostname() == "" {
		return errors.New("config: missing host")
	}
	if (u.Scheme == "tcp" || u.Scheme == "ssl") && u.Port() == "" {
		return errors.New("config: missing port")
	}
	return nil
}
