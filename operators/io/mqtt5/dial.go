package mqtt5

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"time"
)

// Dial opens the TCP connection to an MQTT broker URL, TLS for ssl://,
// tls:// and mqtts:// (the server name from the URL unless cfg sets one),
// within timeout. It dials directly, without a proxy from the environment.
func Dial(ctx context.Context, broker string, cfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	u, err := url.Parse(broker)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var conn net.Conn
	switch u.Scheme {
	case "ssl", "tls", "mqtts":
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName = u.Hostname()
		}
		d := tls.Dialer{Config: cfg}
		conn, err = d.DialContext(ctx, "tcp", u.Host)
	default:
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", u.Host)
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", u.Host, err)
	}
	return conn, nil
}
