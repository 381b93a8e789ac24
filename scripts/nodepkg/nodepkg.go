// Package nodepkg finds the npm packages some tests run on Debian's nodejs
// (aedes, sparkplug-payload, MQTT.js): each pinned by a package.json and
// package-lock.json in its scripts/ folder and installed by
// scripts/install-deps.sh into a folder of its own outside the repository.
package nodepkg

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
)

// Dir is where scripts/install-deps.sh installs the package of the scripts/
// folder name: $env when set, else $HOME/.cache/eddy/NAME; the modules are
// in its node_modules.
func Dir(env, name string) string {
	if d := os.Getenv(env); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "eddy", name)
}

// Node returns the nodejs executable's path, or "" if it is not installed.
func Node() string {
	for _, name := range []string{"node", "nodejs"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Missing returns why npm package pkg at version cannot run from dir, or
// "" when nodejs and that version are installed.
func Missing(dir, pkg, version string) string {
	if Node() == "" {
		return "nodejs is not installed"
	}
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json"))
	if err != nil {
		return pkg + " is not installed in " + dir
	}
	var p struct{ Version string }
	if json.Unmarshal(b, &p) != nil || p.Version != version {
		return pkg + " " + p.Version + " is installed in " + dir + ", the tests pin " + version
	}
	return ""
}
