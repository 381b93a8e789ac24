package config

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
)

// deviceAppID is Eddy's application id for deriving the device id from
// the machine id (a fixed random 128-bit value; never change it, every
// device's id and S3 prefix follow from it).
const deviceAppID = "d873836666997ac96e25a4e521c75e78"

// machineIDPath is the machine id's file (machine-id(5)).
const machineIDPath = "/etc/machine-id"

// MachineDeviceID is the default device id: derived from /etc/machine-id
// (AppSpecificID), else the host name.
func MachineDeviceID() (string, error) {
	if raw, err := readMachineID(); err == nil {
		return AppSpecificID(raw)
	}
	return os.Hostname()
}

func readMachineID() (string, error) {
	b, err := os.ReadFile(machineIDPath)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", errors.New("empty machine id")
	}
	return id, nil
}

// AppSpecificID derives Eddy's device id from a machine id the way
// systemd's sd_id128_get_machine_app_specific does (so
// `systemd-id128 machine-id --app-specific=` with deviceAppID prints the
// same): HMAC-SHA256 keyed with the machine id's 16 bytes over the app
// id's, its first 16 bytes marked as a version 4 UUID, in the machine id's
// format (32 lowercase hex digits). The machine id, which machine-id(5)
// says must not leave the machine, cannot be recovered from it, and a
// clone that regenerated its machine id gets another one.
func AppSpecificID(machineID string) (string, error) {
	key, err := hex.DecodeString(machineID)
	if err != nil || len(key) != 16 {
		return "", errors.New("machine id is not 32 hex digits")
	}
	app, _ := hex.DecodeString(deviceAppID)
	mac := hmac.New(sha256.New, key)
	mac.Write(app)
	id := mac.Sum(nil)[:16]
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return hex.EncodeToString(id), nil
}
