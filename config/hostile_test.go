package config

import (
	"reflect"
	"testing"
)

// TestParse_HostileLANSettings decodes the settings that bound what the
// network can do: the broker's client certificates, limits and acls, the
// admin endpoint's hosts and TLS, the savepoint bound and a source's
// message size; and the defaults they take when unset.
func TestParse_HostileLANSettings(t *testing.T) {
	cfg := mustParse(t, `
agent {
  admin       = "0.0.0.0:8787"
  admin_token = "t"
  admin_hosts = ["gw.local"]
  admin_tls {
    cert      = "admin.pem"
    key       = "admin-key.pem"
    client_ca = "ops-ca.pem"
  }
}
broker {
  listen           = "0.0.0.0:8883"
  max_message_size = "64KiB"
  max_clients      = 50
  max_messages_per_second = 20
  tls {
    ca   = "sensors-ca.pem"
    cert = "broker.pem"
    key  = "broker-key.pem"
  }
  acl {
    user    = "*"
    publish = ["sensors/${username}/#", "sites/${device_id}/${username}"]
  }
  acl {
    user      = "dashboard"
    subscribe = ["results/${device_id}/#", "$SYS/#"]
  }
}
checkpoint { max_savepoints = 3 }
`+base, noEnv)
	if got := cfg.Agent.AdminHosts; !reflect.DeepEqual(got, []string{"gw.local"}) {
		t.Errorf("admin_hosts = %v", got)
	}
	if at := cfg.Agent.AdminTLS; at == nil || at.Cert != "admin.pem" || at.Key != "admin-key.pem" || at.ClientCA != "ops-ca.pem" {
		t.Errorf("admin_tls = %+v", at)
	}
	b := cfg.Broker
	if b.MaxMessageSize != 64<<10 || b.MaxClients != 50 || b.TLS == nil || b.TLS.CA != "sensors-ca.pem" ||
		b.MaxMessagesPerSecond != 20 || b.MaxMessagesBurst != 20 {
		t.Errorf("broker = %+v", b)
	}
	wantACL := []BrokerACL{{User: "*", Publish: []string{"sensors/${username}/#", "sites/${device_id}/${username}"}},
		{User: "dashboard", Subscribe: []string{"results/${device_id}/#", "$SYS/#"}}}
	if !reflect.DeepEqual(b.ACLs, wantACL) {
		t.Errorf("acls = %+v, want %+v", b.ACLs, wantACL)
	}
	if cfg.Checkpoint.MaxSavepoints != 3 {
		t.Errorf("max_savepoints = %d", cfg.Checkpoint.MaxSavepoints)
	}
	if m := cfg.SourceByName("sensors").MQTT; m.MaxMessageSize != DefaultMaxMessageSize {
		t.Errorf("source max_message_size default = %d", m.MaxMessageSize)
	}

	small := mustParse(t, base+`ingest { max_disk = "1MiB" }`+"\n", noEnv)
	if got, want := small.SourceByName("sensors").MQTT.MaxMessageSize, MaxMessageSizeLimit(1<<20); got != want || want >= DefaultMaxMessageSize {
		t.Errorf("max_message_size default with a 1 MiB ingest log = %d, want the segment's limit %d", got, want)
	}
}
