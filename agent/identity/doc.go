// Package identity owns how the device presents itself to the brokers it
// connects to, so that `eddy run` and `eddy probe` present it alike:
//
//   - the device id: the configuration's (set or derived), settled against
//     the id recorded in data_dir (file device_id) and recorded there at
//     the first start (SettleDeviceID, DeviceID);
//   - the TLS configuration of a client from a tls block: the CAs it
//     trusts and the certificate it presents (ClientTLS, CAPool).
//
// The listeners' TLS (the embedded broker, the admin endpoint) is the
// agent's. The package imports only config and state/vfs, so the agent
// and agent/probe both import it, and agent/probe not the agent.
package identity
